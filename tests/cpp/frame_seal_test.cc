// Sealed frames: once a control link's handshake is done, every frame on it
// carries an HMAC over its direction, its count and its body, so a host on
// the path can neither alter, replay, reorder nor reflect one.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "net/socket.h"
#include "rendezvous/handshake.h"

namespace horovod {
namespace {

Digest Key(uint8_t seed) {
  Digest k;
  for (int i = 0; i < 32; ++i) k[i] = static_cast<uint8_t>(seed + i);
  return k;
}

struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds));
    a = Socket(fds[0]);
    b = Socket(fds[1]);
  }
  Socket a, b;
};

// The bytes a sealed `sender` puts on the wire for `body`.
std::string WireBytes(const Socket& sender, Socket& sender_end_peer,
                      const std::string& body) {
  EXPECT_TRUE(sender.WriteFrame(body, Deadline::After(5)).ok());
  std::string raw(8 + body.size() + Socket::kSealBytes, '\0');
  EXPECT_TRUE(
      sender_end_peer.ReadAll(&raw[0], raw.size(), Deadline::After(5)).ok());
  return raw;
}

TEST(FrameSeal, SealedFramesPassBothWays) {
  Pair p;
  p.a.Seal(Key(1), true);
  p.b.Seal(Key(1), false);
  std::string got;
  for (int i = 0; i < 5; ++i) {
    const std::string body = "frame " + std::to_string(i);
    ASSERT_TRUE(p.a.WriteFrame(body, Deadline::After(5)).ok());
    ASSERT_TRUE(p.b.ReadFrame(100, Deadline::After(5), &got).ok());
    EXPECT_EQ(got, body);
    ASSERT_TRUE(p.b.WriteFrame("reply", Deadline::After(5)).ok());
    ASSERT_TRUE(p.a.ReadFrame(100, Deadline::After(5), &got).ok());
    EXPECT_EQ(got, "reply");
  }
  // The limit applies to the body, not to body and seal.
  ASSERT_TRUE(p.a.WriteFrame(std::string(100, 'x'), Deadline::After(5)).ok());
  EXPECT_TRUE(p.b.ReadFrame(100, Deadline::After(5), &got).ok());
}

TEST(FrameSeal, AnAlteredFrameFails) {
  Pair wire, link;
  wire.a.Seal(Key(2), true);
  link.b.Seal(Key(2), false);
  std::string raw = WireBytes(wire.a, wire.b, "allreduce grad.7");
  raw[12] ^= 1;  // one bit of the body
  ASSERT_TRUE(link.a.WriteAll(raw.data(), raw.size(), Deadline::After(5)).ok());
  std::string got;
  Status st = link.b.ReadFrame(100, Deadline::After(5), &got);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("integrity"), std::string::npos) << st.message();
}

TEST(FrameSeal, AReplayedOrReflectedFrameFails) {
  Pair wire, link;
  wire.a.Seal(Key(3), true);
  link.b.Seal(Key(3), false);
  const std::string raw = WireBytes(wire.a, wire.b, "shutdown");
  ASSERT_TRUE(link.a.WriteAll(raw.data(), raw.size(), Deadline::After(5)).ok());
  std::string got;
  ASSERT_TRUE(link.b.ReadFrame(100, Deadline::After(5), &got).ok());
  ASSERT_TRUE(link.a.WriteAll(raw.data(), raw.size(), Deadline::After(5)).ok());
  EXPECT_FALSE(link.b.ReadFrame(100, Deadline::After(5), &got).ok());

  // The initiator's own frame sent back to it.
  Pair back;
  back.b.Seal(Key(3), true);
  ASSERT_TRUE(back.a.WriteAll(raw.data(), raw.size(), Deadline::After(5)).ok());
  EXPECT_FALSE(back.b.ReadFrame(100, Deadline::After(5), &got).ok());
}

TEST(FrameSeal, AnUnsealedPeerIsRefused) {
  Pair p;
  p.b.Seal(Key(4), false);
  ASSERT_TRUE(p.a.WriteFrame("no seal here", Deadline::After(5)).ok());
  std::string got;
  EXPECT_FALSE(p.b.ReadFrame(100, Deadline::After(5), &got).ok());
}

TEST(FrameSeal, TheHandshakeSealsEveryLinkWithOneKeyForItsTwoEnds) {
  for (LinkKind kind : {LinkKind::kControl, LinkKind::kData}) {
    Pair p;
    HandshakeParams server, client;
    server.secret = client.secret = "job-secret";
    server.job_size = client.job_size = 2;
    server.my_rank = 0;
    client.my_rank = 1;
    client.kind = kind;
    int rank = -1;
    LinkKind seen;
    std::thread t([&] {
      EXPECT_TRUE(
          ServerHandshake(p.a, server, Deadline::After(5), &rank, &seen).ok());
    });
    ASSERT_TRUE(ClientHandshake(p.b, client, 0, Deadline::After(5)).ok());
    t.join();
    ASSERT_TRUE(p.a.sealed());
    ASSERT_TRUE(p.b.sealed());
    std::string got;
    ASSERT_TRUE(p.b.WriteFrame("announcement", Deadline::After(5)).ok());
    ASSERT_TRUE(p.a.ReadFrame(100, Deadline::After(5), &got).ok());
    EXPECT_EQ(got, "announcement");
    // Message keys (the data MAC's): each direction's agree at both ends,
    // differ between directions and from one message to the next.
    const Digest out1 = p.b.NextMessageKey(true);
    EXPECT_EQ(out1, p.a.NextMessageKey(false));
    const Digest out2 = p.b.NextMessageKey(true);
    EXPECT_EQ(out2, p.a.NextMessageKey(false));
    EXPECT_NE(out1, out2);
    EXPECT_EQ(p.a.NextMessageKey(true), p.b.NextMessageKey(false));
    EXPECT_NE(p.a.NextMessageKey(true), p.b.NextMessageKey(true));
  }
}

}  // namespace
}  // namespace horovod
