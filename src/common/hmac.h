// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), used to authenticate every
// connection with the job's secret. Pure functions; thread-safe.
#ifndef HOROVOD_COMMON_HMAC_H_
#define HOROVOD_COMMON_HMAC_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace horovod {

using Digest = std::array<uint8_t, 32>;

Digest Sha256(const void* data, size_t len);
Digest HmacSha256(const std::string& key, const void* data, size_t len);
// HMAC-SHA256 under one 32-byte key for many messages, each given in two
// parts: the key's padded states are computed once, and nothing is
// allocated per message (a control frame's MAC is on the data path).
class HmacKey {
 public:
  explicit HmacKey(const Digest& key);
  Digest Mac(const void* a, size_t alen, const void* b, size_t blen) const;

 private:
  uint32_t inner_[8];
  uint32_t outer_[8];
};

// Constant-time comparison, so a peer cannot learn a MAC byte by byte.
bool DigestEqual(const Digest& a, const Digest& b);
// Fills `out` from the kernel's CSPRNG; false if it is unavailable.
bool SecureRandom(void* out, size_t len);
// Lower-case hex of `n` bytes.
std::string HexEncode(const uint8_t* p, size_t n);

}  // namespace horovod

#endif  // HOROVOD_COMMON_HMAC_H_
