// The loopback test transport: a receive nobody answers ends at the
// fabric's deadline, and an Abort on one rank ends its peers' waits at once.
#include "transport/loopback_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace horovod {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

TEST(LoopbackTransport, AnUnansweredReceiveEndsAtTheDeadline) {
  LoopbackFabric fabric(2, 0.2);
  LoopbackTransport t(&fabric, 0);
  char byte;
  const auto start = std::chrono::steady_clock::now();
  Status st = t.SendRecv(-1, nullptr, 0, 1, &byte, 1, 0, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.ToString();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos);
  EXPECT_GE(Seconds(start), 0.19);
  EXPECT_LT(Seconds(start), 5.0);
}

TEST(LoopbackTransport, AbortOnOneRankEndsEveryWait) {
  LoopbackFabric fabric(3, 60);
  Status waits[2];
  std::thread waiters[2];
  const auto start = std::chrono::steady_clock::now();
  for (int r = 1; r <= 2; ++r)
    waiters[r - 1] = std::thread([&, r] {
      LoopbackTransport t(&fabric, r);
      char byte;
      waits[r - 1] = t.SendRecv(-1, nullptr, 0, 0, &byte, 1, 0, nullptr);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  LoopbackTransport(&fabric, 0).Abort("rank 0 gave up");
  for (auto& w : waiters) w.join();
  EXPECT_LT(Seconds(start), 5.0);
  for (const Status& st : waits) {
    EXPECT_EQ(st.code(), StatusCode::kAborted);
    EXPECT_EQ(st.message(), "rank 0 gave up");
  }
  // Later calls fail too, sends included.
  char byte = 0;
  EXPECT_EQ(LoopbackTransport(&fabric, 1)
                .SendRecv(0, &byte, 1, -1, nullptr, 0, 0, nullptr)
                .code(),
            StatusCode::kAborted);
}

}  // namespace
}  // namespace horovod
