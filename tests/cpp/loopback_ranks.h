// RunLoopbackRanks: the collective suites' harness, one thread per rank over
// one in-process LoopbackFabric, each rank handed its transport and the
// member list 0..n-1. A rank that stops at a failed assertion aborts the
// fabric, so its peers fail at once instead of waiting out the timeout.
#ifndef HOROVOD_TESTS_CPP_LOOPBACK_RANKS_H_
#define HOROVOD_TESTS_CPP_LOOPBACK_RANKS_H_

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "transport/loopback_transport.h"

namespace horovod {

inline void RunLoopbackRanks(
    int n, const std::function<void(LoopbackTransport& transport,
                                    const std::vector<int>& members)>& fn) {
  LoopbackFabric fabric(n);
  std::vector<int> members(n);
  for (int i = 0; i < n; ++i) members[i] = i;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      LoopbackTransport t(&fabric, r);
      fn(t, members);
      if (::testing::Test::HasFatalFailure())
        fabric.Abort("rank " + std::to_string(r) +
                     " stopped at a failed assertion");
    });
  for (auto& t : threads) t.join();
}

}  // namespace horovod

#endif  // HOROVOD_TESTS_CPP_LOOPBACK_RANKS_H_
