// Who drives the engine's loop: callers that wait drive it themselves
// (polling, timeouts, many waiters at once), and the loop thread stands
// aside, asleep, while they do.
#include <gtest/gtest.h>
#include <horovod/engine.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "engine_ranks.h"

namespace horovod {
namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Waiting threads drive the loop (HOROVOD_CALLER_DRIVES=1) or leave it to
// the loop thread (0). Either way: several threads per rank waiting on
// synchronous ops at once, async ops nobody waits on (only polled, so the
// loop thread must take over once the waiters leave, also while more keep
// coming), and a wait that times out while this rank drives and later
// completes. Whether the waiter drove
// shows in its own CPU time: reducing 32 MiB takes milliseconds of it, a
// sleeping waiter microseconds.
class EngineDrivers : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineDrivers, ConcurrentWaitersPollingAndTimeouts) {
  Knobs knobs;
  knobs.caller_drives = std::string(GetParam()) == "1";
  const int n = 3, threads = 3, calls = 150;
  const std::vector<std::string> failures = RunRanks(
      n,
      [&](Engine* e, int r, std::string* fail) {
        std::atomic<int> bad{0};
        std::vector<std::thread> waiters;
        for (int t = 0; t < threads; ++t)
          waiters.emplace_back([&, t] {
            for (int i = 0; i < calls; ++i) {
              float v = static_cast<float>(r + i);
              TensorView tv{&v, DataType::kFloat32, {1}};
              CollectiveArgs args;
              args.name = "sync." + std::to_string(t) + "." + std::to_string(i);
              Handle h;
              if (!e->Allreduce(tv, args, &h).ok() || !h.Wait(60).ok() ||
                  v != static_cast<float>(0 + 1 + 2 + n * i))
                ++bad;
            }
          });
        for (auto& w : waiters) w.join();
        if (bad) *fail += "sync;";

        // The tiny op right before parks the loop thread, so the waiter drives
        // the big one unless this thread is descheduled for a while; hence
        // several tries.
        std::vector<float> big(8 << 20);
        int drove = 0;
        for (int k = 0; k < 5; ++k) {
          float tiny = 1.f;
          TensorView tt{&tiny, DataType::kFloat32, {1}};
          TensorView bt{big.data(),
                        DataType::kFloat32,
                        {static_cast<int64_t>(big.size())}};
          std::fill(big.begin(), big.end(), 1.f);
          CollectiveArgs args;
          args.name = "tiny." + std::to_string(k);
          Handle h;
          if (!e->Allreduce(tt, args, &h).ok() || !h.Wait(60).ok())
            *fail += "tiny;";
          args.name = "big." + std::to_string(k);
          if (!e->Allreduce(bt, args, &h).ok()) *fail += "big enqueue;";
          double cpu = ThreadCpuSeconds();
          if (!h.Wait(60).ok() || big[big.size() / 2] != 3.f) *fail += "big;";
          if (ThreadCpuSeconds() - cpu > 2e-3) ++drove;
        }
        if ((drove > 0) != (std::string(GetParam()) == "1"))
          *fail += "waiter drove " + std::to_string(drove) + " of 5;";

        std::vector<float> a(20, 1.f);
        std::vector<Handle> hs(a.size());
        for (size_t i = 0; i < a.size(); ++i) {
          TensorView tv{&a[i], DataType::kFloat32, {1}};
          CollectiveArgs args;
          args.name = "polled." + std::to_string(i);
          if (!e->Allreduce(tv, args, &hs[i]).ok()) *fail += "enqueue;";
        }
        auto until =
            std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (Handle& h : hs)
          while (h.valid() && !h.Poll() &&
                 std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        for (size_t i = 0; i < a.size(); ++i)
          if (!hs[i].Poll() || !hs[i].status().ok() || a[i] != 3.f)
            *fail += "polled;";

        // Async ops submitted one after another right after a synchronous
        // one: the loop thread stands aside while such a burst goes on (its
        // submitter may come back to wait), but not for long. The first op
        // completes while the stream still runs, though nobody waits on it.
        {
          float first = 1.f;
          TensorView ft{&first, DataType::kFloat32, {1}};
          CollectiveArgs args;
          args.name = "stream.sync";
          Handle h;
          if (!e->Allreduce(ft, args, &h).ok() || !h.Wait(60).ok())
            *fail += "stream sync;";
          const int count = 600;
          std::vector<float> vs(count, 1.f);
          std::vector<Handle> stream(count);
          int done_at = -1;
          for (int i = 0; i < count; ++i) {
            TensorView tv{&vs[i], DataType::kFloat32, {1}};
            args.name = "stream." + std::to_string(i);
            if (!e->Allreduce(tv, args, &stream[i]).ok()) *fail += "stream;";
            if (done_at < 0 && stream[0].Poll()) done_at = i;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
          }
          for (int i = 0; i < count; ++i)
            if (!stream[i].Wait(60).ok() || vs[i] != 3.f) *fail += "stream;";
          if (done_at < 0)
            *fail += "nothing of a stream of submissions ran until it ended;";
        }

        float late = 1.f;
        TensorView tv{&late, DataType::kFloat32, {1}};
        CollectiveArgs args;
        args.name = "late";
        if (r != 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        Handle h;
        if (!e->Allreduce(tv, args, &h).ok()) *fail += "late enqueue;";
        if (r == 0 && h.Wait(0.05).code() != StatusCode::kTimeout)
          *fail += "no timeout;";
        if (!h.Wait(60).ok() || late != 3.f) *fail += "late;";
        if (!e->Shutdown().ok()) *fail += "shutdown;";
      },
      knobs);
  ExpectEveryRankOk(failures);
}

INSTANTIATE_TEST_SUITE_P(CallerDrives, EngineDrivers,
                         ::testing::Values("1", "0"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == "1" ? "Waiter"
                                                                 : "LoopThread";
                         });

// While a waiter drives one long wait, the loop thread it stood aside for
// sleeps until the waiter leaves, instead of waking once a grace period to
// ask again: on a host the framework's threads fill, each of those
// wake-ups takes the core from the waiter. Counted as the process's
// voluntary context switches over the wait (every rank is a thread here):
// rank 0 waits 300 ms for rank 1, whose thread sleeps meanwhile.
TEST(Engine, LoopThreadSleepsThroughALongDrive) {
  const auto switches = [] {
    rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_nvcsw;
  };
  std::atomic<long> during{-1};
  const std::vector<std::string> failures =
      RunRanks(2, [&](Engine* e, int r, std::string* fail) {
        float warm = 1.f, late = 1.f;
        Handle h;
        CollectiveArgs args;
        args.name = "warm";
        if (!e->Allreduce(TensorView{&warm, DataType::kFloat32, {1}}, args, &h)
                 .ok() ||
            !h.Wait(60).ok())
          *fail += "warm;";
        args.name = "late";
        if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        if (!e->Allreduce(TensorView{&late, DataType::kFloat32, {1}}, args, &h)
                 .ok()) {
          *fail += "enqueue;";
          return;
        }
        const long before = switches();
        if (!h.Wait(60).ok() || late != 2.f) *fail += "late;";
        if (r == 0) during.store(switches() - before);
      });
  ExpectEveryRankOk(failures);
  // Waking once a millisecond would come to about 300.
  EXPECT_LT(during.load(), 60) << "voluntary switches during the wait";
}

}  // namespace
}  // namespace horovod
