// LinkAcceptor under attack: while two real ranks connect, a crowd of
// clients that send nothing, send one byte at a time, hold the wrong key,
// replay a recorded handshake, claim impossible ranks, or follow a good
// handshake with a malformed first frame. The real links must be accepted
// well within one handshake deadline, and every bad one rejected.
#include "rendezvous/link_acceptor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/peer_table.h"

namespace horovod {
namespace {

constexpr int kSize = 4;  // the acceptor is rank 0; ranks 1..3 may connect

HandshakeParams Params(int rank, const std::string& secret, LinkKind kind) {
  HandshakeParams p;
  p.secret = secret;
  p.my_rank = rank;
  p.job_size = kSize;
  p.kind = kind;
  return p;
}

Socket Dial(int port) {
  Socket s;
  EXPECT_TRUE(Socket::Connect("127.0.0.1", port, Deadline::After(5), &s).ok());
  return s;
}

// A real rank: handshake, then its announcement frame.
Status Honest(int port, int rank, const std::string& announcement) {
  Socket s = Dial(port);
  HVD_RETURN_IF_ERROR(ClientHandshake(
      s, Params(rank, "secret", LinkKind::kControl), 0, Deadline::After(5)));
  return s.WriteFrame(announcement, Deadline::After(5));
}

std::string Hello(int rank, int size, uint32_t magic = 0x48445648) {
  std::string h(32, '\0');
  uint16_t version = 1;
  std::memcpy(&h[0], &magic, 4);
  std::memcpy(&h[4], &version, 2);
  h[6] = 1;  // control link
  std::memcpy(&h[8], &rank, 4);
  std::memcpy(&h[12], &size, 4);
  return h;
}

// A frame header (magic, length) followed by `body`, which may be shorter
// than the length claims.
std::string Frame(uint32_t magic, uint32_t length, const std::string& body) {
  std::string f(8, '\0');
  std::memcpy(&f[0], &magic, 4);
  std::memcpy(&f[4], &length, 4);
  return f + body;
}

struct Outcome {
  Status status;
  double seconds = 0;
  int rejected = 0;
  std::vector<std::string> frames = std::vector<std::string>(kSize);
};

class Acceptor {
 public:
  Acceptor() {
    EXPECT_TRUE(Socket::Listen("127.0.0.1", 0, 128, &listener_, &port_).ok());
  }
  int port() const { return port_; }
  // Runs the acceptor for ranks 1 and 2 on a thread.
  void Start(double timeout_s, size_t max_pending = 64) {
    thread_ = std::thread([=] {
      AcceptorOptions o;
      o.first_frame_max = 512;
      o.max_pending = max_pending;
      LinkAcceptor acceptor(listener_, Params(0, "secret", LinkKind::kControl),
                            LinkKind::kControl, o);
      std::vector<Socket> links(kSize);
      auto start = std::chrono::steady_clock::now();
      out_.status = acceptor.Run(
          Deadline::After(timeout_s), &links,
          [](int r) { return r == 1 || r == 2; },
          [&](int r, const std::string& frame) {
            if (frame == "bad") return Status::Aborted("refused by on_link");
            out_.frames[r] = frame;
            return Status::OK();
          });
      out_.seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
      out_.rejected = acceptor.rejected();
    });
  }
  Outcome Join() {
    thread_.join();
    return out_;
  }

 private:
  Socket listener_;
  int port_ = 0;
  std::thread thread_;
  Outcome out_;
};

TEST(LinkAcceptor, HonestRanksGetThroughACrowdOfBadClients) {
  Acceptor a;
  a.Start(30);
  std::vector<Socket> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(Dial(a.port()));
  std::atomic<bool> stop{false};
  std::vector<std::thread> slow;
  for (int i = 0; i < 4; ++i)
    slow.emplace_back([&] {
      Socket s = Dial(a.port());
      std::string h = Hello(1, kSize);
      for (size_t k = 0; k < h.size() && !stop.load(); ++k) {
        (void)s.WriteAll(&h[k], 1, Deadline::After(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  std::vector<Socket> bad;
  auto send = [&](const std::string& bytes) {
    bad.push_back(Dial(a.port()));
    (void)bad.back().WriteAll(bytes.data(), bytes.size(), Deadline::After(1));
  };
  send(Hello(1, kSize, 0xdeadbeef));  // bad magic
  send(Hello(7, kSize));              // rank >= size
  send(Hello(-1, kSize));             // negative rank
  send(Hello(1, 99));                 // another job's size
  send(std::string("\xff\xff\xff\xff", 4) + std::string(28, 'x'));
  send(std::string("\x80\x04\x95", 3) + std::string(29, 'p'));  // a pickle
  send(Hello(1, kSize).substr(0, 20));  // truncated, then closed
  bad.back().Close();
  // Wrong key: a full handshake that must fail.
  {
    Socket s = Dial(a.port());
    EXPECT_FALSE(ClientHandshake(s, Params(1, "wrong", LinkKind::kControl), 0,
                                 Deadline::After(5))
                     .ok());
  }
  // The right key, then a frame claiming 0xFFFFFFFF bytes, a frame with bad
  // magic, a truncated frame, and an announcement on_link refuses.
  for (const std::string& tail :
       {Frame(kFrameMagic, 0xFFFFFFFFu, ""), Frame(0x58585858, 3, "abc"),
        Frame(kFrameMagic, 16, "abc"), Frame(kFrameMagic, 3, "bad")}) {
    Socket s = Dial(a.port());
    ASSERT_TRUE(ClientHandshake(s, Params(2, "secret", LinkKind::kControl), 0,
                                Deadline::After(5))
                    .ok());
    (void)s.WriteAll(tail.data(), tail.size(), Deadline::After(1));
    s.Close();
  }
  // The wrong kind of link.
  {
    Socket s = Dial(a.port());
    (void)ClientHandshake(s, Params(1, "secret", LinkKind::kData), 0,
                          Deadline::After(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto honest_start = std::chrono::steady_clock::now();
  EXPECT_TRUE(Honest(a.port(), 1, "one").ok());
  EXPECT_TRUE(Honest(a.port(), 2, "two").ok());
  Outcome out = a.Join();
  const double honest_s = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - honest_start)
                              .count();
  stop.store(true);
  for (auto& t : slow) t.join();
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.frames[1], "one");
  EXPECT_EQ(out.frames[2], "two");
  // Well within one 5 s handshake deadline, though 200 idle and 4 slow
  // clients were still pending.
  EXPECT_LT(honest_s, 2.0);
  // 7 malformed hellos, wrong key, 4 bad frames, wrong kind, and over the
  // cap of 64 pending: at least 136 of the 200 idle ones.
  EXPECT_GE(out.rejected, 7 + 1 + 4 + 1 + 136);
}

TEST(LinkAcceptor, ReplayedHandshakeIsRefused) {
  // Record what a real rank sends (hello and proof) through a relay, then
  // send the same bytes on a new connection: the server's fresh nonce makes
  // the recorded proof worthless.
  Acceptor a;
  a.Start(5);
  Socket relay_listener;
  int relay_port = 0;
  ASSERT_TRUE(
      Socket::Listen("127.0.0.1", 0, 8, &relay_listener, &relay_port).ok());
  std::string recorded;
  std::thread relay([&] {
    Socket client, server = Dial(a.port());
    std::string peer;
    ASSERT_TRUE(relay_listener.Accept(Deadline::After(5), &client, &peer).ok());
    char hello[32], reply[64], proof[32];
    ASSERT_TRUE(client.ReadAll(hello, 32, Deadline::After(5)).ok());
    ASSERT_TRUE(server.WriteAll(hello, 32, Deadline::After(5)).ok());
    ASSERT_TRUE(server.ReadAll(reply, 64, Deadline::After(5)).ok());
    ASSERT_TRUE(client.WriteAll(reply, 64, Deadline::After(5)).ok());
    ASSERT_TRUE(client.ReadAll(proof, 32, Deadline::After(5)).ok());
    recorded.assign(hello, 32);
    recorded.append(proof, 32);
    // Never forwarded: the original connection does not complete either.
  });
  {
    Socket s = Dial(relay_port);
    (void)ClientHandshake(s, Params(1, "secret", LinkKind::kControl), 0,
                          Deadline::After(5));
    relay.join();
  }
  Socket replay = Dial(a.port());
  ASSERT_TRUE(
      replay.WriteAll(recorded.data(), recorded.size(), Deadline::After(5))
          .ok());
  char reply[64];
  ASSERT_TRUE(replay.ReadAll(reply, 64, Deadline::After(5)).ok());
  // The acceptor closes the replayed connection instead of taking it.
  char more;
  EXPECT_FALSE(replay.ReadAll(&more, 1, Deadline::After(5)).ok());
  EXPECT_TRUE(Honest(a.port(), 1, "one").ok());
  EXPECT_TRUE(Honest(a.port(), 2, "two").ok());
  Outcome out = a.Join();
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_GE(out.rejected, 1);
}

TEST(LinkAcceptor, TimeoutNamesTheRanksThatNeverCame) {
  Acceptor a;
  a.Start(1);
  EXPECT_TRUE(Honest(a.port(), 2, "two").ok());
  Outcome out = a.Join();
  EXPECT_EQ(out.status.code(), StatusCode::kTimeout);
  EXPECT_NE(out.status.message().find("rank(s) [1] did not connect"),
            std::string::npos)
      << out.status.message();
  EXPECT_LT(out.seconds, 3);
}

TEST(PeerTable, AnnouncementsCarrySettingsThatRankZeroCompares) {
  std::string addr, host, settings;
  ASSERT_TRUE(
      ParseAnnouncement("10.0.0.2:4000 hostB A=1;B=2", &addr, &host, &settings)
          .ok());
  EXPECT_EQ(addr, "10.0.0.2:4000");
  EXPECT_EQ(host, "hostB");
  EXPECT_EQ(settings, "A=1;B=2");
  ASSERT_TRUE(
      ParseAnnouncement("10.0.0.2:4000 hostB", &addr, &host, &settings).ok());
  EXPECT_EQ(settings, "");
  EXPECT_FALSE(
      ParseAnnouncement("10.0.0.2:4000 hostB A=\x01", &addr, &host, &settings)
          .ok());
  EXPECT_FALSE(ParseAnnouncement("10.0.0.2:4000 hostB " +
                                     std::string(kMaxAnnouncementBytes, 'x'),
                                 &addr, &host, &settings)
                   .ok());

  EXPECT_TRUE(CompareSettings("A=1;B=2", "A=1;B=2", 3).ok());
  Status st = CompareSettings("A=1;B=2", "A=1;B=5", 3);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("B differs between ranks: 2 on rank 0, 5 on "
                              "rank 3"),
            std::string::npos)
      << st.message();
  st = CompareSettings("A=1", "A=1;C=4", 2);
  EXPECT_NE(st.message().find("C differs between ranks: (unset) on rank 0, 4 "
                              "on rank 2"),
            std::string::npos)
      << st.message();
}

TEST(PeerTable, PlacementFollowsTheHostKeysEvenWhenUneven) {
  // Three ranks on a, one on b, two on c, interleaved.
  const std::vector<std::string> hosts = {"a", "b", "a", "c", "a", "c"};
  const int want_cross[] = {0, 1, 0, 2, 0, 2};
  for (int r = 0; r < 6; ++r) {
    const HostPlacement p = PlaceByHostKeys(hosts, r);
    EXPECT_EQ(p.cross_rank, want_cross[r]) << r;
    EXPECT_EQ(p.cross_size, 3);
    EXPECT_FALSE(p.homogeneous);
  }
  const HostPlacement even = PlaceByHostKeys({"x", "x", "y", "y"}, 2);
  EXPECT_EQ(even.cross_rank, 1);
  EXPECT_EQ(even.cross_size, 2);
  EXPECT_TRUE(even.homogeneous);
  const HostPlacement one = PlaceByHostKeys({"x"}, 0);
  EXPECT_EQ(one.cross_rank, 0);
  EXPECT_EQ(one.cross_size, 1);
  EXPECT_TRUE(one.homogeneous);
}

}  // namespace
}  // namespace horovod
