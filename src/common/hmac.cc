#include "common/hmac.h"

#include <sys/random.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace horovod {
namespace {

constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void Compress(uint32_t h[8], const uint8_t block[64]) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = (uint32_t(block[4 * i]) << 24) | (uint32_t(block[4 * i + 1]) << 16) |
           (uint32_t(block[4 * i + 2]) << 8) | uint32_t(block[4 * i + 3]);
  }
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
  uint32_t e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t s1 = Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25);
    uint32_t ch = (e & f) ^ (~e & g);
    uint32_t t1 = k + s1 + ch + kRound[i] + w[i];
    uint32_t s0 = Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22);
    uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    uint32_t t2 = s0 + maj;
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += k;
}

// SHA-256 over data given in parts, from a state that may already have
// taken whole blocks (an HMAC key's inner or outer pad).
struct Stream {
  uint32_t h[8];
  uint8_t block[64];
  size_t fill = 0;
  uint64_t total = 0;

  void Update(const void* data, size_t len) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    total += len;
    while (len > 0) {
      size_t take = std::min(len, 64 - fill);
      std::memcpy(block + fill, p, take);
      fill += take;
      p += take;
      len -= take;
      if (fill == 64) {
        Compress(h, block);
        fill = 0;
      }
    }
  }

  Digest Finish() {
    const uint64_t bits = total * 8;
    const uint8_t one = 0x80;
    Update(&one, 1);
    const uint8_t zero = 0;
    while (fill != 56) Update(&zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; ++i)
      len[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    Update(len, 8);
    Digest out;
    for (int i = 0; i < 8; ++i) {
      out[4 * i] = static_cast<uint8_t>(h[i] >> 24);
      out[4 * i + 1] = static_cast<uint8_t>(h[i] >> 16);
      out[4 * i + 2] = static_cast<uint8_t>(h[i] >> 8);
      out[4 * i + 3] = static_cast<uint8_t>(h[i]);
    }
    return out;
  }
};

constexpr uint32_t kInitialState[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                       0xa54ff53a, 0x510e527f, 0x9b05688c,
                                       0x1f83d9ab, 0x5be0cd19};

}  // namespace

HmacKey::HmacKey(const Digest& key) {
  uint8_t pad[64];
  for (int i = 0; i < 64; ++i)
    pad[i] = static_cast<uint8_t>((i < 32 ? key[i] : 0) ^ 0x36);
  std::memcpy(inner_, kInitialState, sizeof(inner_));
  Compress(inner_, pad);
  for (int i = 0; i < 64; ++i)
    pad[i] = static_cast<uint8_t>((i < 32 ? key[i] : 0) ^ 0x5c);
  std::memcpy(outer_, kInitialState, sizeof(outer_));
  Compress(outer_, pad);
}

Digest HmacKey::Mac(const void* a, size_t alen, const void* b,
                    size_t blen) const {
  Stream in;
  std::memcpy(in.h, inner_, sizeof(in.h));
  in.total = 64;
  in.Update(a, alen);
  in.Update(b, blen);
  const Digest inner = in.Finish();
  Stream out;
  std::memcpy(out.h, outer_, sizeof(out.h));
  out.total = 64;
  out.Update(inner.data(), inner.size());
  return out.Finish();
}

Digest Sha256(const void* data, size_t len) {
  Stream s;
  std::memcpy(s.h, kInitialState, sizeof(s.h));
  s.Update(data, len);
  return s.Finish();
}

Digest HmacSha256(const std::string& key, const void* data, size_t len) {
  uint8_t k[64] = {0};
  if (key.size() > 64) {
    Digest kd = Sha256(key.data(), key.size());
    std::memcpy(k, kd.data(), kd.size());
  } else {
    std::memcpy(k, key.data(), key.size());
  }
  std::vector<uint8_t> inner(64 + len);
  for (int i = 0; i < 64; ++i) inner[i] = k[i] ^ 0x36;
  if (len) std::memcpy(inner.data() + 64, data, len);
  Digest ih = Sha256(inner.data(), inner.size());
  uint8_t outer[64 + 32];
  for (int i = 0; i < 64; ++i) outer[i] = k[i] ^ 0x5c;
  std::memcpy(outer + 64, ih.data(), 32);
  return Sha256(outer, sizeof(outer));
}

bool DigestEqual(const Digest& a, const Digest& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

bool SecureRandom(void* out, size_t len) {
  uint8_t* p = static_cast<uint8_t*>(out);
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

std::string HexEncode(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

}  // namespace horovod
