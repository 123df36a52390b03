// The data MAC: with it, every message on a TCP data link carries a
// Poly1305 tag under a key only the two ranks know, fresh for each message
// and direction, so a host on the path can neither alter, replay nor
// reflect one unnoticed. A relay between two transports plays that host.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "transport/tcp_transport.h"

namespace horovod {
namespace {

constexpr size_t kTag = 16;

Digest Key() {
  Digest k;
  for (int i = 0; i < 32; ++i) k[i] = static_cast<uint8_t>(7 * i + 1);
  return k;
}

void SocketPair(Socket* a, Socket* b) {
  int fds[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds));
  *a = Socket(fds[0]);
  *b = Socket(fds[1]);
}

std::vector<char> Pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 31 + seed);
  return v;
}

// Rank 0 and rank 1, each with one sealed socket to the other: directly
// joined, or through the relay's two sockets.
struct TwoRanks {
  explicit TwoRanks(bool relay, bool mac = true) {
    Socket s0, s1;
    if (relay) {
      SocketPair(&s0, &from0);
      SocketPair(&to1, &s1);
    } else {
      SocketPair(&s0, &s1);
    }
    s0.Seal(Key(), true);
    s1.Seal(Key(), false);
    std::vector<Socket> p0(2), p1(2);
    p0[1] = std::move(s0);
    p1[0] = std::move(s1);
    rank0 = std::make_unique<TcpTransport>(0, std::move(p0), 10, mac);
    rank1 = std::make_unique<TcpTransport>(1, std::move(p1), 10, mac);
  }
  std::string Take(size_t n) {  // what rank 0 put on the wire
    std::string b(n, '\0');
    EXPECT_TRUE(from0.ReadAll(&b[0], n, Deadline::After(10)).ok());
    return b;
  }
  void Give(const std::string& b) {  // to rank 1
    EXPECT_TRUE(to1.WriteAll(b.data(), b.size(), Deadline::After(10)).ok());
  }
  std::unique_ptr<TcpTransport> rank0, rank1;
  Socket from0, to1;
};

// Rank 0 sends `send` and receives into `recv` while rank 1 sends `b` and
// receives into `got_a` in 64 KiB chunks, which must arrive in order.
void Exchange(TwoRanks& r, const std::vector<iovec>& send,
              const std::vector<iovec>& recv, const std::vector<char>& b,
              std::vector<char>* got_a) {
  size_t next = 0;
  ChunkFn check = [&](size_t off, size_t len) {
    EXPECT_EQ(off, next);
    next += len;
  };
  Status st0;
  std::thread t([&] {
    st0 = r.rank0->SendRecvV(1, send.data(), send.size(), 1, recv.data(),
                             recv.size(), 0, nullptr);
  });
  Status st1 = r.rank1->SendRecv(0, b.data(), b.size(), 0, got_a->data(),
                                 got_a->size(), 64 << 10, &check);
  t.join();
  ASSERT_TRUE(st0.ok()) << st0.ToString();
  ASSERT_TRUE(st1.ok()) << st1.ToString();
  EXPECT_EQ(next, b.size());
}

TEST(DataMac, MessagesOfEverySizePassBothWaysWithChunks) {
  TwoRanks r(false);
  for (size_t n :
       {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{(3 << 20) + 5}}) {
    auto a = Pattern(n, 1), b = Pattern(n, 2);
    std::vector<char> got_a(n), got_b(n);
    Exchange(r, {{a.data(), n}}, {{got_b.data(), n}}, b, &got_a);
    EXPECT_EQ(got_a, a) << n;
    EXPECT_EQ(got_b, b) << n;
  }
}

// Spans of `v` with uneven lengths (some empty, more of them than one
// system call takes): the same bytes as `v` itself.
std::vector<iovec> Spans(std::vector<char>& v, int seed) {
  std::vector<iovec> out;
  size_t at = 0;
  for (size_t k = 0; at < v.size(); ++k) {
    const size_t len =
        std::min(v.size() - at, (k * 7919 + static_cast<size_t>(seed)) % 9000);
    out.push_back({v.data() + at, len});
    at += len;
  }
  return out;
}

// A message gathered from spans is the contiguous message, tag included,
// and one scattered to spans is received as a contiguous one would be,
// with or without the MAC: the two ends need not share a layout.
TEST(DataMac, MessagesGatheredFromAndScatteredToSpansMatchContiguousOnes) {
  for (bool mac : {true, false}) {
    TwoRanks r(false, mac);
    for (size_t n : {size_t{40000}, size_t{(3 << 20) + 5}}) {
      auto a = Pattern(n, 4), b = Pattern(n, 5);
      std::vector<char> got_a(n), got_b(n);
      const std::vector<iovec> send = Spans(a, 1), recv = Spans(got_b, 2);
      if (n > (1 << 20)) {
        ASSERT_GT(send.size(), 128u);
      }
      Exchange(r, send, recv, b, &got_a);
      EXPECT_EQ(got_a, a) << n << " mac " << mac;
      EXPECT_EQ(got_b, b) << n << " mac " << mac;
    }
  }
}

TEST(DataMac, AnAlteredByteFailsTheReceiverNamingTheSender) {
  for (size_t flip : {size_t{0}, size_t{70000}, size_t{100000 + 3}}) {
    TwoRanks r(true);
    const auto a = Pattern(100000, 3);
    std::vector<char> got(a.size());
    std::thread sender(
        [&] { EXPECT_TRUE(r.rank0->Send(1, a.data(), a.size()).ok()); });
    std::thread relay([&] {
      std::string wire = r.Take(a.size() + kTag);
      wire[flip] ^= 0x10;  // a payload byte, or one of the tag's
      r.Give(wire);
    });
    Status st = r.rank1->Recv(0, got.data(), got.size());
    sender.join();
    relay.join();
    EXPECT_EQ(st.code(), StatusCode::kTampered) << st.ToString();
    EXPECT_NE(st.message().find("data link with rank 0 was tampered with"),
              std::string::npos)
        << st.message();
  }
}

TEST(DataMac, WithoutItTheSameAlterationGoesUnnoticed) {
  TwoRanks r(true, false);
  const auto a = Pattern(1000, 4);
  std::vector<char> got(a.size());
  std::thread sender(
      [&] { EXPECT_TRUE(r.rank0->Send(1, a.data(), a.size()).ok()); });
  std::thread relay([&] {
    std::string wire = r.Take(a.size());
    wire[10] ^= 0x10;
    r.Give(wire);
  });
  Status st = r.rank1->Recv(0, got.data(), got.size());
  sender.join();
  relay.join();
  EXPECT_TRUE(st.ok());
  EXPECT_NE(got, a);
}

TEST(DataMac, AReplayedMessageFails) {
  TwoRanks r(true);
  const auto first = Pattern(500, 5), second = Pattern(500, 6);
  std::vector<char> got(500);
  std::thread sender([&] {
    EXPECT_TRUE(r.rank0->Send(1, first.data(), 500).ok());
    EXPECT_TRUE(r.rank0->Send(1, second.data(), 500).ok());
  });
  std::thread relay([&] {
    const std::string one = r.Take(500 + kTag);
    r.Take(500 + kTag);
    r.Give(one);
    r.Give(one);  // the first message again, in place of the second
  });
  ASSERT_TRUE(r.rank1->Recv(0, got.data(), 500).ok());
  EXPECT_EQ(got, first);
  Status st = r.rank1->Recv(0, got.data(), 500);
  sender.join();
  relay.join();
  EXPECT_EQ(st.code(), StatusCode::kTampered) << st.ToString();
}

TEST(DataMac, AMessageReflectedToItsSenderFails) {
  TwoRanks r(true);
  const auto a = Pattern(300, 7);
  std::vector<char> got(300);
  ASSERT_TRUE(r.rank0->Send(1, a.data(), a.size()).ok());
  const std::string wire = r.Take(a.size() + kTag);
  ASSERT_TRUE(
      r.from0.WriteAll(wire.data(), wire.size(), Deadline::After(10)).ok());
  Status st = r.rank0->Recv(1, got.data(), got.size());
  EXPECT_EQ(st.code(), StatusCode::kTampered) << st.ToString();
}

}  // namespace
}  // namespace horovod
