// Multi-rank engine tests in one process: each rank an Engine on a thread
// of its own, joined over real authenticated loopback TCP links (and shared
// memory). Used by the engine_*_test suites; the threads are joined before
// the helpers return.
#ifndef HOROVOD_TESTS_CPP_ENGINE_RANKS_H_
#define HOROVOD_TESTS_CPP_ENGINE_RANKS_H_

#include <gtest/gtest.h>
#include <horovod/engine.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_job.h"

namespace horovod {

// Starts `n` engines in this process, one thread each, joined over loopback
// TCP (and shared memory), and runs `body` on each. A rank reports trouble
// by appending to *fail; returns each rank's report ("" when all went well).
// `knobs_of(r)`: rank r's knobs.
inline std::vector<std::string> RunRanks(
    int n, const std::function<void(Engine* e, int r, std::string* fail)>& body,
    const std::function<Knobs(int)>& knobs_of) {
  const int port = FreePort();
  std::vector<std::string> failures(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      std::unique_ptr<Engine> e;
      Status st = Engine::Start(LoopbackJob(r, n, port, "test-secret"),
                                knobs_of(r), &e);
      if (!st.ok()) {
        failures[r] = st.ToString();
        return;
      }
      body(e.get(), r, &failures[r]);
    });
  }
  for (auto& t : ranks) t.join();
  return failures;
}

inline std::vector<std::string> RunRanks(
    int n, const std::function<void(Engine* e, int r, std::string* fail)>& body,
    const Knobs& knobs = Knobs()) {
  return RunRanks(n, body, [&knobs](int) { return knobs; });
}

inline void ExpectEveryRankOk(const std::vector<std::string>& failures) {
  for (size_t r = 0; r < failures.size(); ++r)
    EXPECT_EQ(failures[r], "") << "rank " << r;
}

}  // namespace horovod

#endif  // HOROVOD_TESTS_CPP_ENGINE_RANKS_H_
