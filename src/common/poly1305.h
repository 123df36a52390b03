// Poly1305 (RFC 8439, section 2.5): a one-time authenticator over a message
// given in any number of pieces. Plain 64-bit arithmetic, several GB/s on
// one core, so bulk transfers can carry a MAC where HMAC-SHA256 would halve
// their speed. A key must authenticate one message only: callers derive a
// fresh one per message (Socket::MessageKey). One object per message;
// thread-compatible.
#ifndef HOROVOD_COMMON_POLY1305_H_
#define HOROVOD_COMMON_POLY1305_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace horovod {

class Poly1305 {
 public:
  using Tag = std::array<uint8_t, 16>;
  static constexpr size_t kKeyBytes = 32;

  // Starts a message under a fresh 32-byte one-time key.
  void Start(const uint8_t* key);
  void Update(const void* data, size_t len);
  Tag Finish();

 private:
  void Blocks(const uint8_t* p, size_t n, uint64_t final_bit);

  uint64_t r_[3] = {0, 0, 0};   // clamped key half, 44/44/42-bit limbs
  uint64_t rr_[3] = {0, 0, 0};  // r^2 mod 2^130 - 5, same limbs
  uint64_t h_[3] = {0, 0, 0};   // accumulator, same limbs
  uint64_t pad_[2] = {0, 0};    // the key's other half, added at the end
  uint8_t partial_[16] = {};
  size_t fill_ = 0;
};

}  // namespace horovod

#endif  // HOROVOD_COMMON_POLY1305_H_
