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

namespace {

// out = a * r mod 2^130 - 5, carried so that every limb is within its
// width (out1 may exceed 44 bits by a few units). Limbs weigh 2^0, 2^44 and
// 2^88, so a product's part at 2^132 folds back as 4 * 5 = 20 at 2^0.
void MulMod(const uint64_t a[3], const uint64_t r[3], uint64_t out[3]) {
  const uint64_t s1 = r[1] * 20, s2 = r[2] * 20;
  const u128 d0 = u128(a[0]) * r[0] + u128(a[1]) * s2 + u128(a[2]) * s1;
  u128 d1 = u128(a[0]) * r[1] + u128(a[1]) * r[0] + u128(a[2]) * s2;
  u128 d2 = u128(a[0]) * r[2] + u128(a[1]) * r[1] + u128(a[2]) * r[0];
  out[0] = static_cast<uint64_t>(d0) & kMask44;
  d1 += static_cast<uint64_t>(d0 >> 44);
  out[1] = static_cast<uint64_t>(d1) & kMask44;
  d2 += static_cast<uint64_t>(d1 >> 44);
  out[2] = static_cast<uint64_t>(d2) & kMask42;
  out[0] += static_cast<uint64_t>(d2 >> 42) * 5;
  out[1] += out[0] >> 44;
  out[0] &= kMask44;
}

// A 16-byte block as limbs, with 2^128 added when final_bit is 1.
inline void Limbs(const uint8_t* p, uint64_t top, uint64_t m[3]) {
  const uint64_t t0 = Load64(p), t1 = Load64(p + 8);
  m[0] = t0 & kMask44;
  m[1] = ((t0 >> 44) | (t1 << 20)) & kMask44;
  m[2] = ((t1 >> 24) & kMask42) | top;
}

}  // namespace

void Poly1305::Start(const uint8_t* key) {
  const uint64_t t0 = Load64(key) & 0x0ffffffc0fffffffULL;
  const uint64_t t1 = Load64(key + 8) & 0x0ffffffc0ffffffcULL;
  r_[0] = t0 & kMask44;
  r_[1] = ((t0 >> 44) | (t1 << 20)) & kMask44;
  r_[2] = (t1 >> 24) & kMask42;
  MulMod(r_, r_, rr_);
  h_[0] = h_[1] = h_[2] = 0;
  pad_[0] = Load64(key + 16);
  pad_[1] = Load64(key + 24);
  fill_ = 0;
}

// h = (h + block + final_bit * 2^128) * r mod 2^130 - 5, per 16-byte block.
// Two blocks at a time as h = (h + m1) * r^2 + m2 * r: the two products
// are independent, so the CPU overlaps them, and one carry chain serves
// both blocks.
void Poly1305::Blocks(const uint8_t* p, size_t n, uint64_t final_bit) {
  const uint64_t r0 = r_[0], r1 = r_[1], r2 = r_[2];
  const uint64_t s1 = r1 * 20, s2 = r2 * 20;
  const uint64_t q0 = rr_[0], q1 = rr_[1], q2 = rr_[2];
  const uint64_t t1 = q1 * 20, t2 = q2 * 20;
  uint64_t h0 = h_[0], h1 = h_[1], h2 = h_[2];
  const uint64_t top = final_bit << 40;
  for (; n >= 2; n -= 2, p += 32) {
    uint64_t a[3], b[3];
    Limbs(p, top, a);
    Limbs(p + 16, top, b);
    h0 += a[0];
    h1 += a[1];
    h2 += a[2];
    const u128 d0 = u128(h0) * q0 + u128(h1) * t2 + u128(h2) * t1 +
                    u128(b[0]) * r0 + u128(b[1]) * s2 + u128(b[2]) * s1;
    u128 d1 = u128(h0) * q1 + u128(h1) * q0 + u128(h2) * t2 + u128(b[0]) * r1 +
              u128(b[1]) * r0 + u128(b[2]) * s2;
    u128 d2 = u128(h0) * q2 + u128(h1) * q1 + u128(h2) * q0 + u128(b[0]) * r2 +
              u128(b[1]) * r1 + u128(b[2]) * r0;
    h0 = static_cast<uint64_t>(d0) & kMask44;
    d1 += static_cast<uint64_t>(d0 >> 44);
    h1 = static_cast<uint64_t>(d1) & kMask44;
    d2 += static_cast<uint64_t>(d1 >> 44);
    h2 = static_cast<uint64_t>(d2) & kMask42;
    h0 += static_cast<uint64_t>(d2 >> 42) * 5;
    h1 += h0 >> 44;
    h0 &= kMask44;
  }
  uint64_t h[3] = {h0, h1, h2};
  if (n == 1) {
    uint64_t m[3];
    Limbs(p, top, m);
    for (int i = 0; i < 3; ++i) h[i] += m[i];
    MulMod(h, r_, h);
  }
  h_[0] = h[0];
  h_[1] = h[1];
  h_[2] = h[2];
}

void Poly1305::Update(const void* data, size_t len) {
  if (len == 0) return;  // data may be null then
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
