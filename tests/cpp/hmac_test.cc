#include "common/hmac.h"

#include <gtest/gtest.h>

#include <string>

namespace horovod {
namespace {

std::string Hex(const Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Hex(Sha256("", 0)),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hex(Sha256("abc", 3)),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string two_blocks =
      "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(Hex(Sha256(two_blocks.data(), two_blocks.size())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(HmacSha256, Rfc4231Cases) {
  std::string key(20, '\x0b');
  EXPECT_EQ(Hex(HmacSha256(key, "Hi There", 8)),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  std::string msg = "what do ya want for nothing?";
  EXPECT_EQ(Hex(HmacSha256("Jefe", msg.data(), msg.size())),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  std::string long_key(131, '\xaa');
  std::string m = "Test Using Larger Than Block-Size Key - Hash Key First";
  EXPECT_EQ(Hex(HmacSha256(long_key, m.data(), m.size())),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacKey, MatchesHmacSha256ForEverySplitAndLength) {
  Digest key;
  for (int i = 0; i < 32; ++i) key[i] = static_cast<uint8_t>(i * 7 + 1);
  const std::string key_text(reinterpret_cast<const char*>(key.data()), 32);
  const HmacKey k(key);
  std::string msg;
  for (int len = 0; len < 300; ++len) {
    msg.push_back(static_cast<char>(len * 13));
    const Digest want = HmacSha256(key_text, msg.data(), msg.size());
    for (size_t split : {size_t{0}, msg.size() / 3, msg.size()})
      ASSERT_TRUE(DigestEqual(
          k.Mac(msg.data(), split, msg.data() + split, msg.size() - split),
          want))
          << "length " << msg.size() << " split " << split;
  }
}

TEST(DigestEqual, ComparesAllBytes) {
  Digest a = Sha256("x", 1), b = a;
  EXPECT_TRUE(DigestEqual(a, b));
  b[31] ^= 1;
  EXPECT_FALSE(DigestEqual(a, b));
}

}  // namespace
}  // namespace horovod
