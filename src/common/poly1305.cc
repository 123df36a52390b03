#include "common/poly1305.h"

#include <cstring>

namespace horovod {
namespace {

using u128 = unsigned __int128;
constexpr uint64_t kMask44 = (uint64_t{1} << 44) - 1;
constexpr uint64_t kMask42 = (uint64_t{1} << 42) - 1;

// Little-endian loads; on a little-endian CPU each is one move.
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

inline void Store64(uint64_t v, uint8_t* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

void Poly1305::Start(const uint8_t* key) {
  const uint64_t t0 = Load64(key) & 0x0ffffffc0fffffffULL;
  const uint64_t t1 = Load64(key + 8) & 0x0ffffffc0ffffffcULL;
  r_[0] = t0 & kMask44;
  r_[1] = ((t0 >> 44) | (t1 << 20)) & kMask44;
  r_[2] = (t1 >> 24) & kMask42;
  h_[0] = h_[1] = h_[2] = 0;
  pad_[0] = Load64(key + 16);
  pad_[1] = Load64(key + 24);
  fill_ = 0;
}

// h = (h + block + final_bit * 2^128) * r mod 2^130 - 5, per 16-byte block.
// Limbs weigh 2^0, 2^44 and 2^88, so a product's part at 2^132 folds back
// as 4 * 5 = 20 at 2^0.
void Poly1305::Blocks(const uint8_t* p, size_t n, uint64_t final_bit) {
  const uint64_t r0 = r_[0], r1 = r_[1], r2 = r_[2];
  const uint64_t s1 = r1 * 20, s2 = r2 * 20;
  uint64_t h0 = h_[0], h1 = h_[1], h2 = h_[2];
  const uint64_t top = final_bit << 40;
  for (; n > 0; --n, p += 16) {
    const uint64_t t0 = Load64(p), t1 = Load64(p + 8);
    h0 += t0 & kMask44;
    h1 += ((t0 >> 44) | (t1 << 20)) & kMask44;
    h2 += ((t1 >> 24) & kMask42) | top;
    u128 d0 = u128(h0) * r0 + u128(h1) * s2 + u128(h2) * s1;
    u128 d1 = u128(h0) * r1 + u128(h1) * r0 + u128(h2) * s2;
    u128 d2 = u128(h0) * r2 + u128(h1) * r1 + u128(h2) * r0;
    h0 = static_cast<uint64_t>(d0) & kMask44;
    d1 += static_cast<uint64_t>(d0 >> 44);
    h1 = static_cast<uint64_t>(d1) & kMask44;
    d2 += static_cast<uint64_t>(d1 >> 44);
    h2 = static_cast<uint64_t>(d2) & kMask42;
    h0 += static_cast<uint64_t>(d2 >> 42) * 5;
    h1 += h0 >> 44;
    h0 &= kMask44;
  }
  h_[0] = h0;
  h_[1] = h1;
  h_[2] = h2;
}

void Poly1305::Update(const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (fill_ > 0) {
    const size_t take = len < 16 - fill_ ? len : 16 - fill_;
    std::memcpy(partial_ + fill_, p, take);
    fill_ += take;
    p += take;
    len -= take;
    if (fill_ < 16) return;
    Blocks(partial_, 1, 1);
    fill_ = 0;
  }
  Blocks(p, len / 16, 1);
  p += len / 16 * 16;
  len %= 16;
  std::memcpy(partial_, p, len);
  fill_ = len;
}

Poly1305::Tag Poly1305::Finish() {
  if (fill_ > 0) {
    partial_[fill_] = 1;
    std::memset(partial_ + fill_ + 1, 0, 16 - fill_ - 1);
    Blocks(partial_, 1, 0);
  }
  uint64_t h0 = h_[0], h1 = h_[1], h2 = h_[2];
  // Carry fully, twice, so every limb is within its width and h < 2^130.
  for (int i = 0; i < 2; ++i) {
    h2 += h1 >> 44;
    h1 &= kMask44;
    h0 += (h2 >> 42) * 5;
    h2 &= kMask42;
    h1 += h0 >> 44;
    h0 &= kMask44;
  }
  // h mod p: take g = h + 5 - 2^130 when it does not go negative.
  uint64_t g0 = h0 + 5;
  uint64_t g1 = h1 + (g0 >> 44);
  g0 &= kMask44;
  uint64_t g2 = h2 + (g1 >> 44) - (uint64_t{1} << 42);
  g1 &= kMask44;
  const uint64_t use_g = (g2 >> 63) - 1;  // all ones when g2 >= 0
  h0 = (h0 & ~use_g) | (g0 & use_g);
  h1 = (h1 & ~use_g) | (g1 & use_g);
  h2 = (h2 & ~use_g) | (g2 & use_g & kMask42);
  // (h + pad) mod 2^128.
  uint64_t lo = h0 | (h1 << 44);
  uint64_t hi = (h1 >> 20) | (h2 << 24);
  lo += pad_[0];
  hi += pad_[1] + (lo < pad_[0] ? 1 : 0);
  Tag tag;
  Store64(lo, tag.data());
  Store64(hi, tag.data() + 8);
  return tag;
}

}  // namespace horovod
