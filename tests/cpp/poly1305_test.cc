#include "common/poly1305.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/hmac.h"

namespace horovod {
namespace {

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(
        static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string TagOf(const std::vector<uint8_t>& key, const void* msg,
                  size_t len) {
  Poly1305 p;
  p.Start(key.data());
  p.Update(msg, len);
  const Poly1305::Tag t = p.Finish();
  return HexEncode(t.data(), t.size());
}

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> m(n);
  for (size_t i = 0; i < n; ++i) m[i] = static_cast<uint8_t>((i * 7 + 3) % 256);
  return m;
}

TEST(Poly1305, Rfc8439Example) {
  const auto key = FromHex(
      "85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b");
  const std::string msg = "Cryptographic Forum Research Group";
  EXPECT_EQ(TagOf(key, msg.data(), msg.size()),
            "a8061dc1305136c6c22b8baf0c0127a9");
}

// Tags computed by an independent implementation (OpenSSL's) for the key
// 00 01 .. 1f and the message bytes (7 i + 3) mod 256; the lengths cover an
// empty message, partial and whole final blocks.
TEST(Poly1305, AgreesWithAnotherImplementation) {
  std::vector<uint8_t> key(32);
  for (int i = 0; i < 32; ++i) key[i] = static_cast<uint8_t>(i);
  const std::pair<size_t, const char*> cases[] = {
      {0, "101112131415161718191a1b1c1d1e1f"},
      {1, "1f14191e23282d32373c41464b50555a"},
      {15, "5d6ba854aef3623ab81aa0860c70efe4"},
      {16, "a438fd3012dfd5343a24319fac979eff"},
      {17, "c6ac9b188a8e6c83bbf68080665fc386"},
      {63, "aa4fe391987212ddc924e40575094e34"},
      {64, "55e564fff1b743fad219c5d22daede54"},
      {1000, "b74ce66f76a2566fb0052967c146de6d"},
      {4099, "2c17899108905bb0b249ebdc6b01e1d4"}};
  for (const auto& c : cases) {
    const auto msg = Pattern(c.first);
    EXPECT_EQ(TagOf(key, msg.data(), msg.size()), c.second)
        << c.first << " bytes";
  }
}

// All-ones key and message: the accumulator reaches its largest values, so
// the carries and the final reduction modulo 2^130 - 5 are exercised.
TEST(Poly1305, LargestValuesReduceCorrectly) {
  const std::vector<uint8_t> key(32, 0xff);
  const std::pair<size_t, const char*> cases[] = {
      {16, "fbffff17faffff17faffff17faffff17"},
      {64, "900fe32bc15fa8d7bca8efe4c7e37eb1"},
      {333, "fa387deaf177560160e9d7641734415f"}};
  for (const auto& c : cases) {
    const std::vector<uint8_t> msg(c.first, 0xff);
    EXPECT_EQ(TagOf(key, msg.data(), msg.size()), c.second)
        << c.first << " bytes";
  }
}

TEST(Poly1305, PiecesGiveTheSameTagAsTheWhole) {
  std::vector<uint8_t> key(32);
  for (int i = 0; i < 32; ++i) key[i] = static_cast<uint8_t>(200 - i);
  const auto msg = Pattern(1000);
  const std::string whole = TagOf(key, msg.data(), msg.size());
  for (size_t piece : {1, 3, 15, 16, 17, 100, 999}) {
    Poly1305 p;
    p.Start(key.data());
    for (size_t off = 0; off < msg.size(); off += piece)
      p.Update(msg.data() + off, std::min(piece, msg.size() - off));
    const Poly1305::Tag t = p.Finish();
    EXPECT_EQ(HexEncode(t.data(), t.size()), whole) << "pieces of " << piece;
  }
}

TEST(Poly1305, AnyChangedBitChangesTheTag) {
  std::vector<uint8_t> key(32, 0x5a);
  auto msg = Pattern(100);
  const std::string good = TagOf(key, msg.data(), msg.size());
  for (size_t i = 0; i < msg.size(); i += 9) {
    msg[i] ^= 1;
    EXPECT_NE(TagOf(key, msg.data(), msg.size()), good) << "byte " << i;
    msg[i] ^= 1;
  }
  EXPECT_NE(TagOf(key, msg.data(), msg.size() - 1), good);
}

}  // namespace
}  // namespace horovod
