// Silence verdicts: failure diagnosis reads the silent rank back from the
// text the transport and the liveness check write, so the writer's wording
// and the reader must agree; a real transport timeout guards that here.
#include "common/silence_verdict.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <vector>

#include "net/socket.h"
#include "transport/tcp_transport.h"

namespace horovod {
namespace {

TEST(SilenceVerdict, NamesTheRankAndReadsItBack) {
  for (int rank : {0, 1, 7, 1023}) {
    const std::string v = SilenceVerdict(rank, 2.5, "hung or unreachable");
    EXPECT_EQ(SilentRank(v), rank) << v;
    EXPECT_NE(v.find("2.5 s"), std::string::npos) << v;
    EXPECT_NE(v.find("HOROVOD_OPERATION_TIMEOUT_SECONDS"), std::string::npos);
    EXPECT_NE(v.find("hung or unreachable"), std::string::npos) << v;
  }
}

TEST(SilenceVerdict, AnyOtherFailureIsNotOne) {
  for (const char* m : {"", "rank", "rank 3", "rank 3 sent nothing",
                        "rank 3 failed: rank 0 sent nothing for 3.0 s",
                        "lost connection to rank 0 (EOF); it probably died",
                        "rank x sent nothing for 1.0 s"})
    EXPECT_EQ(SilentRank(m), -1) << m;
}

TEST(SilenceVerdict, ATransportTimeoutIsOneNamingTheSilentPeer) {
  int fds[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds));
  std::vector<Socket> p0(2);
  p0[1] = Socket(fds[0]);
  Socket quiet(fds[1]);  // rank 1 exists but never sends
  TcpTransport rank0(0, std::move(p0), 0.2);
  char out = 1, in = 0;
  const Status st = rank0.SendRecv(1, &out, 1, 1, &in, 1, 0, nullptr);
  ASSERT_EQ(st.code(), StatusCode::kTimeout) << st.ToString();
  EXPECT_EQ(SilentRank(st.message()), 1) << st.message();
}

}  // namespace
}  // namespace horovod
