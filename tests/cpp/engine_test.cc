// The public C++ API end to end: three engines in one process (one per
// thread), joined over real authenticated TCP links.
#include <gtest/gtest.h>
#include <horovod/engine.h>
#include <horovod/framework_api.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "test_job.h"

namespace horovod {
namespace {

// Starts `n` engines in this process, one thread each, joined over loopback
// TCP (and shared memory), and runs `body` on each. A rank reports trouble
// by appending to *fail; returns each rank's report ("" when all went well).
// `knobs_of(r)`: rank r's knobs.
std::vector<std::string> RunRanks(
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

std::vector<std::string> RunRanks(
    int n, const std::function<void(Engine* e, int r, std::string* fail)>& body,
    const Knobs& knobs = Knobs()) {
  return RunRanks(n, body, [&knobs](int) { return knobs; });
}

void ExpectEveryRankOk(const std::vector<std::string>& failures) {
  for (size_t r = 0; r < failures.size(); ++r)
    EXPECT_EQ(failures[r], "") << "rank " << r;
}

// Rank 0 waits in a barrier while rank 1 waits in an allreduce rank 0
// never submits: both fail at once, naming what each waits in, and the job
// goes on.
TEST(Engine, RanksBlockedInOperationsThatCanNeverMatchFailAtOnce) {
  const std::vector<std::string> failures =
      RunRanks(2, [&](Engine* e, int r, std::string* fail) {
        const auto t0 = std::chrono::steady_clock::now();
        Status st;
        if (r == 0) {
          st = e->Barrier();
        } else {
          float x = 1;
          Handle h;
          CollectiveArgs args;
          args.name = "only.on.1";
          st = e->Allreduce(TensorView{&x, DataType::kFloat32, {1}}, args, &h);
          if (st.ok()) st = h.Wait(30);
        }
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count();
        if (st.code() != StatusCode::kMismatch ||
            st.message().find("rank 0 waits in barrier; rank 1 waits in "
                              "allreduce 'only.on.1'") == std::string::npos)
          *fail += "status: " + st.ToString() + ";";
        if (took > 2.0) *fail += "took " + std::to_string(took) + " s;";
        if (!e->Barrier().ok()) *fail += "barrier after;";
      });
  ExpectEveryRankOk(failures);
}

// The same picture while another thread of rank 0 still runs: that thread
// will submit the barrier, so nothing may fail. (A rank is blocked only
// when every thread that has submitted to it waits.)
TEST(Engine, ARankWithARunningThreadIsNotBlocked) {
  const std::vector<std::string> failures =
      RunRanks(2, [&](Engine* e, int r, std::string* fail) {
        float x = 1;
        CollectiveArgs args;
        args.name = "x";
        args.op = ReduceOp::kSum;
        TensorView t{&x, DataType::kFloat32, {1}};
        if (r == 1) {
          // The first barrier meets rank 0's other thread at once, the
          // second only after it slept.
          if (!e->Barrier().ok() || !e->Barrier().ok()) *fail += "barrier;";
          Handle h;
          if (!e->Allreduce(t, args, &h).ok() || !h.Wait(30).ok())
            *fail += "allreduce;";
          return;
        }
        std::atomic<bool> counted{false};
        std::thread other([&] {
          if (!e->Barrier().ok()) *fail += "first barrier;";
          counted = true;  // it has submitted: the engine knows it
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          if (!e->Barrier().ok()) *fail += "second barrier;";
        });
        while (!counted) std::this_thread::yield();
        Handle h;
        if (!e->Allreduce(t, args, &h).ok() || !h.Wait(30).ok())
          *fail += "allreduce;";
        other.join();
        if (x != 2) *fail += "sum;";
      });
  ExpectEveryRankOk(failures);
}

// A helper thread that submitted, finished and left the census (as a
// framework's worker thread does after running one collective) no longer
// keeps its rank from counting as blocked: the mismatch fails at once even
// though that thread is still alive.
TEST(Engine, AThreadThatLeftTheCensusDoesNotHideABlockedRank) {
  const std::vector<std::string> failures = RunRanks(2, [&](Engine* e, int r,
                                                            std::string* fail) {
    std::atomic<bool> left{false}, done{false};
    std::thread helper([&] {
      if (!e->Barrier().ok()) *fail += "helper barrier;";
      e->LeaveCensus();
      left = true;
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
    while (!left) std::this_thread::yield();
    const auto t0 = std::chrono::steady_clock::now();
    float x = 1;
    Handle h;
    CollectiveArgs args;
    args.name = r == 0 ? "left.a" : "left.b";
    Status st = e->Allreduce(TensorView{&x, DataType::kFloat32, {1}}, args, &h);
    if (st.ok()) st = h.Wait(30);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    done = true;
    helper.join();
    if (st.code() != StatusCode::kMismatch)
      *fail += "status: " + st.ToString() + ";";
    if (took > 5.0) *fail += "took " + std::to_string(took) + " s;";
  });
  ExpectEveryRankOk(failures);
}

TEST(Engine, CollectivesMismatchAndShutdown) {
  const int n = 3;
  const std::vector<std::string> failures = RunRanks(n, [&](Engine* e, int r,
                                                            std::string* fail) {
    std::vector<float> v(1000, float(r + 1));
    TensorView t{v.data(), DataType::kFloat32, {1000}};
    CollectiveArgs args;
    args.name = "v";
    args.op = ReduceOp::kAverage;
    Handle h;
    if (!e->Allreduce(t, args, &h).ok() || !h.Wait(30).ok() || v[999] != 2.0f)
      *fail += "allreduce;";
    std::vector<int32_t> g(r, r);
    TensorView gt{g.data(), DataType::kInt32, {r}};
    args.name = "g";
    if (!e->Allgather(gt, args, &h).ok() || !h.Wait(30).ok() ||
        h.output_shape() != std::vector<int64_t>{3} ||
        static_cast<int32_t*>(h.output()->data())[2] != 2)
      *fail += "allgather;";
    std::vector<double> bad(r + 1, 1.0);
    TensorView bt{bad.data(), DataType::kFloat64, {r + 1}};
    args.name = "bad";
    if (!e->Allreduce(bt, args, &h).ok() ||
        h.Wait(30).code() != StatusCode::kMismatch)
      *fail += "mismatch;";
    if (!e->Barrier().ok()) *fail += "barrier;";
    if (!e->Shutdown().ok()) *fail += "shutdown;";
  });
  ExpectEveryRankOk(failures);
}

// Every member of a grouped broadcast receives the root's tensor, whatever
// its dtype and size.
TEST(Engine, GroupedBroadcastDeliversEveryMember) {
  const int n = 3;
  ExpectEveryRankOk(RunRanks(n, [&](Engine* e, int r, std::string* fail) {
    std::vector<int32_t> a(5, r);
    std::vector<double> b(1000, r + 0.5);
    std::vector<uint8_t> c(3, static_cast<uint8_t>(r));
    CollectiveArgs args;
    args.name = "members";
    args.root = 1;
    std::vector<Handle> hs;
    if (!e->GroupedBroadcast({{a.data(), DataType::kInt32, {5}},
                              {b.data(), DataType::kFloat64, {1000}},
                              {c.data(), DataType::kUInt8, {3}}},
                             args, &hs)
             .ok() ||
        hs.size() != 3) {
      *fail += "enqueue;";
      return;
    }
    for (Handle& h : hs)
      if (!h.Wait(30).ok()) *fail += "wait;";
    if (a[4] != 1 || b[999] != 1.5 || c[2] != 1) *fail += "values;";
  }));
}

// The C table kernel libraries use: every collective kind by value, outputs
// that outlive their operation, received splits, and input refused before
// anything is enqueued (reported by wait, flagged as rejected, no other
// rank involved, the job going on).
TEST(Engine, FrameworkApiRunsCollectivesThroughTheCTable) {
  const int n = 3;
  const HvdFrameworkApi* api = FrameworkApi();
  ASSERT_EQ(api->version, static_cast<uint32_t>(HVD_FRAMEWORK_API_VERSION));
  ExpectEveryRankOk(RunRanks(n, [&](Engine* e, int r, std::string* fail) {
    auto run = [&](HvdOpArgs args, std::vector<HvdTensor> ts) {
      HvdOp* op = api->start(e, &args, ts.data(), static_cast<int>(ts.size()));
      if (api->wait(op) != 0) *fail += std::string(api->message(op)) + ";";
      return op;
    };
    if (api->rank(e) != r) *fail += "rank;";
    HvdOpArgs args{};
    args.reduce_op = static_cast<int>(ReduceOp::kSum);
    args.prescale = args.postscale = 1.0;

    float a[4] = {1.0f * r, 1, 2, 3};
    double b[2] = {0.5, 1.0 * r};
    const int64_t four[1] = {4}, two[1] = {2};
    args.op_type = static_cast<int>(OpType::kAllreduce);
    args.name = "c.allreduce";
    api->release(run(
        args, {{a, static_cast<int>(DataType::kFloat32), 1, four, nullptr},
               {b, static_cast<int>(DataType::kFloat64), 1, two, nullptr}}));
    if (a[0] != 3.0f || a[3] != 9.0f || b[0] != 1.5 || b[1] != 3.0)
      *fail += "allreduce values;";
    float result[4] = {};
    HvdTensor oop{result, static_cast<int>(DataType::kFloat32), 1, four, a};
    args.name = "c.out_of_place";
    api->release(run(args, {oop}));
    if (result[3] != 27.0f || a[3] != 9.0f) *fail += "out of place;";

    std::vector<int32_t> rows(2 * (r + 1), r);
    const int64_t shape[2] = {r + 1, 2};
    args.op_type = static_cast<int>(OpType::kAllgather);
    args.name = "c.allgather";
    HvdOp* op = run(args, {{rows.data(), static_cast<int>(DataType::kInt32), 2,
                            shape, nullptr}});
    HvdOutput out{};
    if (api->output(op, 0, &out) != 0 || out.ndim != 2 || out.shape[0] != 6 ||
        out.shape[1] != 2 || out.bytes != 12 * sizeof(int32_t))
      *fail += "allgather shape;";
    api->release(op);  // the output's owner keeps its bytes
    const auto* got = static_cast<const int32_t*>(out.data);
    if (out.data == nullptr || got[0] != 0 || got[2] != 1 || got[11] != 2)
      *fail += "allgather values;";
    if (out.owner != nullptr) api->release_output(out.owner);

    std::vector<int64_t> sent(n, 10 * r);
    const int64_t splits[3] = {0, 1, 2};
    const int64_t rows3[1] = {n};
    args.op_type = static_cast<int>(OpType::kAlltoall);
    args.name = "c.alltoall";
    args.splits = splits;
    args.num_splits = n;
    op = run(args, {{sent.data(), static_cast<int>(DataType::kInt64), 1, rows3,
                     nullptr}});
    const int64_t* received = nullptr;
    if (api->received_splits(op, &received) != n || received[0] != r ||
        received[2] != r)
      *fail += "alltoall splits;";
    api->release(op);
    args.splits = nullptr;
    args.num_splits = 0;

    // Bad input on rank 1 only: refused there, nothing enqueued.
    if (r == 1) {
      args.op_type = static_cast<int>(OpType::kAllreduce);
      args.name = "c.bad";
      HvdTensor bad{a, 99, 1, four, nullptr};
      op = api->start(e, &args, &bad, 1);
      if (api->wait(op) != static_cast<int>(StatusCode::kInvalidArgument) ||
          api->rejected(op) != 1 ||
          std::string(api->message(op)).find("rank 1") == std::string::npos)
        *fail += "bad input not refused;";
      api->release(op);
      args.op_type = static_cast<int>(OpType::kBarrier);
      op = api->start(e, &args, &bad, 1);
      if (api->wait(op) != static_cast<int>(StatusCode::kInvalidArgument))
        *fail += "barrier through the table;";
      api->release(op);
    }
    args.op_type = static_cast<int>(OpType::kBroadcast);
    args.name = "c.after";
    args.root = 2;
    a[0] = static_cast<float>(r);
    api->release(run(
        args, {{a, static_cast<int>(DataType::kFloat32), 1, four, nullptr}}));
    if (a[0] != 2.0f) *fail += "broadcast after refusal;";
    api->leave_census(e);
  }));
}

// Out-of-place allreduce (TensorView::input): the result lands in `data`,
// the input is left as it was, through every path: one large tensor (block
// rounds over shared memory), a fused group mixing in-place and
// out-of-place members (one-barrier small path), a prescaled operand, and an
// input that is another member's output (overlap: the fusion buffer).
TEST(Engine, OutOfPlaceAllreduceLeavesTheInputAlone) {
  const int n = 3;
  ExpectEveryRankOk(RunRanks(n, [&](Engine* e, int r, std::string* fail) {
    auto reduce = [&](std::vector<TensorView> views, const char* name,
                      double prescale = 1.0) {
      CollectiveArgs args;
      args.name = name;
      args.prescale = prescale;
      std::vector<Handle> hs;
      if (!e->GroupedAllreduce(views, args, &hs).ok()) *fail += "enqueue;";
      for (Handle& h : hs)
        if (!h.Wait(30).ok()) *fail += std::string(name) + " wait;";
    };
    const int64_t big = 1 << 20;
    std::vector<float> in(big), out(big, -1.0f);
    for (int64_t i = 0; i < big; ++i) in[i] = static_cast<float>(r + i % 5);
    TensorView v{out.data(), DataType::kFloat32, {big}};
    v.input = in.data();
    reduce({v}, "oop.big");
    for (int64_t i : {int64_t{0}, big / 2, big - 1})
      if (out[i] != 3.0f + 3.0f * (i % 5) || in[i] != r + i % 5)
        *fail += "big values;";

    std::vector<int32_t> a_in(7, r + 1), a_out(7, 0), b(3, 10 * r);
    TensorView a{a_out.data(), DataType::kInt32, {7}};
    a.input = a_in.data();
    reduce({a, {b.data(), DataType::kInt32, {3}}}, "oop.group");
    if (a_out[6] != 6 || a_in[6] != r + 1 || b[2] != 30) *fail += "group;";

    std::vector<double> p_in(4, 2.0 * (r + 1)), p_out(4, 0);
    TensorView p{p_out.data(), DataType::kFloat64, {4}};
    p.input = p_in.data();
    reduce({p}, "oop.prescale", 0.5);
    if (p_out[3] != 6.0 || p_in[3] != 2.0 * (r + 1)) *fail += "prescale;";

    // y's operand is x's output buffer as it was before the operation.
    std::vector<float> x_in(5, 1.0f), x_out(5, static_cast<float>(r)),
        y_out(5, 0.0f);
    TensorView x{x_out.data(), DataType::kFloat32, {5}};
    x.input = x_in.data();
    TensorView y{y_out.data(), DataType::kFloat32, {5}};
    y.input = x_out.data();
    reduce({x, y}, "oop.overlap");
    if (x_out[4] != 3.0f || y_out[4] != 3.0f) *fail += "overlap;";

    Handle h;
    CollectiveArgs args;
    args.name = "oop.allgather";
    if (e->Allgather(x, args, &h).code() != StatusCode::kInvalidArgument)
      *fail += "input accepted by allgather;";
  }));
}

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

// Every collective in process sets smaller than the host's group, one that
// includes rank 0 (the coordinator) and one that does not, then again after
// a set is removed (groups are rebuilt). They run over shared memory of
// their own: rank 0's timeline shows SHM_ for its set's transfers and no
// TCP_ at all.
std::string RunInSet(Engine& e, int r, int set, const std::vector<int>& m,
                     const std::string& tag) {
  std::string bad;
  const int n = static_cast<int>(m.size());
  int me = 0;
  while (m[me] != r) ++me;
  float sum = 0;
  for (int x : m) sum += x + 1;
  CollectiveArgs args;
  args.process_set = set;
  Handle h;
  for (int64_t count : {int64_t{1000}, int64_t{3} << 20}) {
    std::vector<float> v(count, float(r + 1));
    args.name = tag + ".ar" + std::to_string(count);
    if (!e.Allreduce({v.data(), DataType::kFloat32, {count}}, args, &h).ok() ||
        !h.Wait(60).ok() || v[0] != sum || v[count - 1] != sum)
      bad += tag + " allreduce " + std::to_string(count) + ";";
  }
  std::vector<int32_t> g(r + 1, r);
  args.name = tag + ".ag";
  if (!e.Allgather({g.data(), DataType::kInt32, {r + 1}}, args, &h).ok() ||
      !h.Wait(60).ok()) {
    bad += tag + " allgather;";
  } else {
    const int32_t* out = static_cast<int32_t*>(h.output()->data());
    std::vector<int32_t> want;
    for (int x : m) want.insert(want.end(), x + 1, x);
    if (h.output_shape() != std::vector<int64_t>{int64_t(want.size())} ||
        !std::equal(want.begin(), want.end(), out))
      bad += tag + " allgather values;";
  }
  std::vector<float> b(8, float(r));
  args.name = tag + ".bc";
  args.root = m.back();
  if (!e.Broadcast({b.data(), DataType::kFloat32, {8}}, args, &h).ok() ||
      !h.Wait(60).ok() || b[7] != float(m.back()))
    bad += tag + " broadcast;";
  std::vector<int32_t> a(n);
  for (int j = 0; j < n; ++j) a[j] = r * 100 + j;
  args.name = tag + ".a2a";
  if (!e.Alltoall({a.data(), DataType::kInt32, {n}}, args, &h).ok() ||
      !h.Wait(60).ok()) {
    bad += tag + " alltoall;";
  } else {
    const int32_t* out = static_cast<int32_t*>(h.output()->data());
    for (int j = 0; j < n; ++j)
      if (out[j] != m[j] * 100 + me) bad += tag + " alltoall values;";
  }
  std::vector<float> rs(2 * n, float(r + 1));
  args.name = tag + ".rs";
  args.op = ReduceOp::kSum;
  if (!e.Reducescatter({rs.data(), DataType::kFloat32, {2 * n}}, args, &h)
           .ok() ||
      !h.Wait(60).ok() || h.output_shape() != std::vector<int64_t>{2} ||
      static_cast<float*>(h.output()->data())[1] != sum)
    bad += tag + " reducescatter;";
  return bad;
}

TEST(Engine, ProcessSetsWithinAHostShareMemory) {
  const int n = 3;
  const std::string timeline =
      ::testing::TempDir() + "sets" + std::to_string(getpid()) + ".json";
  const std::vector<std::string> failures =
      RunRanks(n, [&](Engine* e, int r, std::string* fail) {
        if (r == 0 && !e->StartTimeline(timeline, false).ok())
          *fail += "timeline;";
        int a = -1, b = -1;
        if (!e->AddProcessSet({0, 1}, &a).ok() ||
            !e->AddProcessSet({1, 2}, &b).ok())
          *fail += "add;";
        for (int round = 0; round < 2; ++round) {
          const std::string k = std::to_string(round);
          if (r <= 1) *fail += RunInSet(*e, r, a, {0, 1}, "a" + k);
          if (r >= 1) *fail += RunInSet(*e, r, b, {1, 2}, "b" + k);
        }
        if (!e->RemoveProcessSet(a).ok()) *fail += "remove;";
        if (r >= 1) *fail += RunInSet(*e, r, b, {1, 2}, "b2");
        // One rank's shutdown ends the job for all.
        if (!e->Barrier().ok()) *fail += "barrier;";
        if (!e->Shutdown().ok()) *fail += "shutdown;";
      });
  ExpectEveryRankOk(failures);
  std::ifstream f(timeline);
  std::string text((std::istreambuf_iterator<char>(f)),
                   std::istreambuf_iterator<char>());
  for (const char* op : {"SHM_ALLREDUCE", "SHM_ALLGATHER", "SHM_BROADCAST",
                         "SHM_ALLTOALL", "SHM_REDUCESCATTER"})
    EXPECT_NE(text.find(op), std::string::npos) << op;
  EXPECT_EQ(text.find("TCP_"), std::string::npos);
  std::remove(timeline.c_str());
}

// op=Adasum: refused over three ranks, for integers and for reducescatter,
// on every rank that asks, naming the rank; combined over a process set of
// two (orthogonal vectors add, equal ones average, each tensor of a group
// with its own coefficients), in place and out of place.
TEST(Engine, AdasumAllreduceAndWhatItRefuses) {
  const int n = 3;
  ExpectEveryRankOk(RunRanks(n, [&](Engine* e, int r, std::string* fail) {
    auto refused = [&](Status st, const char* what) {
      if (st.ok() || st.message().find(what) == std::string::npos ||
          st.message().find("rank " + std::to_string(r)) == std::string::npos)
        *fail +=
            std::string("not refused: ") + what + " (" + st.message() + ");";
    };
    CollectiveArgs args;
    args.op = ReduceOp::kAdasum;
    Handle h;
    std::vector<float> f(2, 1.0f);
    std::vector<int32_t> i(2, 1);
    args.name = "adasum.three";
    refused(e->Allreduce({f.data(), DataType::kFloat32, {2}}, args, &h),
            "power-of-two number of ranks; the process set has 3");
    int pair = -1;
    if (!e->AddProcessSet({0, 1}, &pair).ok()) *fail += "add;";
    args.process_set = pair;
    if (r <= 1) {
      args.name = "adasum.int";
      refused(e->Allreduce({i.data(), DataType::kInt32, {2}}, args, &h),
              "not int32");
      args.name = "adasum.rs";
      refused(e->Reducescatter({f.data(), DataType::kFloat32, {2}}, args, &h),
              "allreduce only");
      std::vector<float> ortho = {r == 0 ? 3.0f : 0.0f, r == 0 ? 0.0f : 4.0f};
      std::vector<double> same = {2.0, -6.0};
      std::vector<float> in = {1.0f + r, 1.0f + r}, out(2, 0.0f);
      TensorView oop{out.data(), DataType::kFloat32, {2}};
      oop.input = in.data();
      args.name = "adasum.group";
      std::vector<Handle> hs;
      if (!e->GroupedAllreduce({{ortho.data(), DataType::kFloat32, {2}},
                                {same.data(), DataType::kFloat64, {2}}},
                               args, &hs)
               .ok())
        *fail += "group enqueue;";
      for (Handle& g : hs)
        if (!g.Wait(30).ok()) *fail += "group wait;";
      if (ortho != std::vector<float>{3.0f, 4.0f}) *fail += "orthogonal;";
      if (same != std::vector<double>{2.0, -6.0}) *fail += "equal;";
      args.name = "adasum.oop";
      if (!e->Allreduce(oop, args, &h).ok() || !h.Wait(30).ok())
        *fail += "oop;";
      // (1,1) and (2,2): coefficients 1 - 4/4 = 0 and 1 - 4/16 = 0.75.
      if (out != std::vector<float>{1.5f, 1.5f} || in[0] != 1.0f + r)
        *fail += "out of place;";
    }
    if (!e->Barrier().ok()) *fail += "barrier;";
  }));
}

// One grouped allreduce given the same tensor twice, large enough to take
// several shared-memory rounds: each element is reduced once, not reduced
// again as the second tensor's input.
TEST(Engine, AliasedTensorsInOneFusedAllreduce) {
  const int n = 3;
  const std::vector<std::string> failures =
      RunRanks(n, [&](Engine* e, int r, std::string* fail) {
        const int64_t count = 3 << 20;  // 12 MiB: rounds of a 4 MiB region
        std::vector<float> v(count, float(r + 1));
        TensorView t{v.data(), DataType::kFloat32, {count}};
        CollectiveArgs args;
        args.name = "alias";
        std::vector<Handle> hs;
        if (!e->GroupedAllreduce({t, t}, args, &hs).ok() ||
            !hs[0].Wait(60).ok() || !hs[1].Wait(60).ok())
          *fail += "allreduce;";
        for (int64_t i : {int64_t{0}, count / 2, count - 1})
          if (v[i] != 6.f)
            *fail +=
                "v[" + std::to_string(i) + "]=" + std::to_string(v[i]) + ";";
        if (!e->Barrier().ok() || !e->Shutdown().ok()) *fail += "end;";
      });
  ExpectEveryRankOk(failures);
}

// The metrics count the work done between two snapshots and split the
// loop's time by phase: with shared memory the fused tensors are reduced
// where they lie (no copies); over TCP they pass through the fusion buffer.
void CheckMetrics(bool shm, bool grouped = false) {
  const int n = 3, steps = 10, per_step = 3;
  const int64_t count = 16 << 10;  // 64 KiB of float32
  Knobs knobs;
  knobs.shm_disable = !shm;
  const std::vector<std::string> failures = RunRanks(
      n,
      [&](Engine* e, int r, std::string* fail) {
        std::vector<std::vector<float>> v(per_step,
                                          std::vector<float>(count, 1.f));
        const EngineMetrics m0 = e->Metrics();
        const auto start = std::chrono::steady_clock::now();
        for (int s = 0; s < steps; ++s) {
          std::vector<Handle> hs(per_step);
          if (grouped) {
            std::vector<TensorView> ts;
            for (auto& t : v)
              ts.push_back({t.data(), DataType::kFloat32, {count}});
            CollectiveArgs args;
            args.name = "metrics.group";
            if (!e->GroupedAllreduce(ts, args, &hs).ok()) *fail += "submit;";
          }
          for (int i = 0; i < per_step && !grouped; ++i) {
            CollectiveArgs args;
            args.name = "metrics." + std::to_string(i);
            if (!e->Allreduce({v[i].data(), DataType::kFloat32, {count}}, args,
                              &hs[i])
                     .ok())
              *fail += "submit;";
          }
          for (Handle& h : hs)
            if (!h.Wait(60).ok()) *fail += "wait;";
        }
        const double elapsed = std::chrono::duration<double>(
                                   std::chrono::steady_clock::now() - start)
                                   .count();
        const EngineMetrics m = e->Metrics();
        auto expect = [&](bool ok, const std::string& what) {
          if (!ok) *fail += what + ";";
        };
        expect(m.tensors - m0.tensors == steps * per_step,
               "tensors " + std::to_string(m.tensors - m0.tensors));
        expect(m.bytes - m0.bytes == uint64_t(steps * per_step * count * 4),
               "bytes " + std::to_string(m.bytes - m0.bytes));
        const uint64_t responses = m.responses - m0.responses;
        expect(responses >= steps && responses <= steps * per_step,
               "responses " + std::to_string(responses));
        expect(m.cycles - m0.cycles >= steps, "cycles");
        expect(m.transfer_s > m0.transfer_s, "no transfer time");
        expect(shm ? m.copy_s == m0.copy_s : m.copy_s > m0.copy_s,
               "copy time " + std::to_string(m.copy_s - m0.copy_s));
        expect(m.wait_s > m0.wait_s, "no wait time");
        // The same names every step: workers name them by cache slot once
        // the first step has cached them (grouped or not). Rank 0 sends
        // nothing, but names single tensors by slot on the ready board,
        // which every rank on one host shares.
        const uint64_t hits = m.cache_hits - m0.cache_hits;
        const uint64_t misses = m.cache_misses - m0.cache_misses;
        const uint64_t board = shm && !grouped ? (steps - 1) * per_step : 0;
        if (r == 0)
          expect(hits == board && misses == 0,
                 "rank 0: hits " + std::to_string(hits) + " misses " +
                     std::to_string(misses));
        else
          expect(hits == (steps - 1) * per_step && misses == per_step,
                 "hits " + std::to_string(hits) + " misses " +
                     std::to_string(misses));
        const double loop =
            (m.idle_s - m0.idle_s) + (m.negotiate_s - m0.negotiate_s) +
            (m.bookkeeping_s - m0.bookkeeping_s) + (m.copy_s - m0.copy_s) +
            (m.transfer_s - m0.transfer_s);
        // A loop step that began before the first snapshot (an idle wait,
        // at most a second) counts whole.
        expect(loop > 0 && loop < elapsed + 1.5,
               "loop " + std::to_string(loop) + " s in " +
                   std::to_string(elapsed) + " s");
        if (!e->Barrier().ok() || !e->Shutdown().ok()) *fail += "end;";
      },
      knobs);
  ExpectEveryRankOk(failures);
}

TEST(Engine, MetricsCountTheWorkAndSplitTheTimeSharedMemory) {
  CheckMetrics(true);
}

TEST(Engine, MetricsCountTheWorkAndSplitTheTimeTcp) { CheckMetrics(false); }

// A group's tensors are named by cache slot from the second step on too.
TEST(Engine, MetricsGroupedTensorsHitTheCache) { CheckMetrics(true, true); }

// A thread whose handle completed finds its tensor in the metrics at once,
// also when the loop thread (not the waiting one) ran the step: the work
// counts do not wait for the step to end.
TEST(Engine, MetricsHoldTheWorkOfEveryCompletedHandle) {
  const int n = 2, steps = 300;
  Knobs knobs;
  knobs.caller_drives = false;
  const std::vector<std::string> failures = RunRanks(
      n,
      [&](Engine* e, int r, std::string* fail) {
        std::vector<float> v(4, 1.f);
        const EngineMetrics m0 = e->Metrics();
        for (int s = 0; s < steps && fail->empty(); ++s) {
          Handle h;
          CollectiveArgs args;
          args.name = "metrics.now";
          if (!e->Allreduce({v.data(), DataType::kFloat32, {4}}, args, &h)
                   .ok() ||
              !h.Wait(60).ok()) {
            *fail += "allreduce;";
            break;
          }
          const EngineMetrics m = e->Metrics();
          const uint64_t done = static_cast<uint64_t>(s) + 1;
          const uint64_t named = (m.cache_hits - m0.cache_hits) +
                                 (m.cache_misses - m0.cache_misses);
          if (m.tensors - m0.tensors != done ||
              m.bytes - m0.bytes != done * 16 || (r > 0 && named != done))
            *fail += "step " + std::to_string(s) + ": tensors " +
                     std::to_string(m.tensors - m0.tensors) + " named " +
                     std::to_string(named) + ";";
        }
        if (!e->Barrier().ok() || !e->Shutdown().ok()) *fail += "end;";
      },
      knobs);
  ExpectEveryRankOk(failures);
}

// Cached allreduces agreed on the ready board (every rank on one host):
// small tensors reduced from the boards, large ones fused into collectives,
// each with its reduce op and scales; exact results every step, also when
// one rank submits later than the board waits (they go through rank 0: an
// early rank's offers wait out the patience, the late rank's follow at once).
TEST(Engine, ReadyBoardStepsGiveExactResults) {
  const int n = 3, steps = 12;
  struct Case {
    const char* name;
    int64_t count;
    ReduceOp op;
    double prescale, postscale;
  };
  const std::vector<Case> cases = {
      {"small.sum", 3, ReduceOp::kSum, 1, 1},
      {"small.avg", 5, ReduceOp::kAverage, 1, 1},
      {"small.min", 4, ReduceOp::kMin, 1, 1},
      {"small.max", 4, ReduceOp::kMax, 1, 1},
      {"small.scaled", 2, ReduceOp::kSum, 2, 0.25},
      {"large.a", 5000, ReduceOp::kSum, 1, 1},
      {"large.b", 7000, ReduceOp::kSum, 1, 1},
      {"large.avg", 6000, ReduceOp::kAverage, 1, 1}};
  std::vector<uint64_t> overdue(n);  // in step 5, per rank
  const std::vector<std::string> failures = RunRanks(n, [&](Engine* e, int r,
                                                            std::string* fail) {
    const EngineMetrics m0 = e->Metrics();
    EngineMetrics before_late;
    for (int s = 0; s < steps; ++s) {
      // Step 5: rank 2 is late, beyond the board's patience.
      if (s == 5) before_late = e->Metrics();
      if (s == 5 && r == 2)
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::vector<std::vector<float>> v;
      std::vector<Handle> hs(cases.size());
      for (size_t c = 0; c < cases.size(); ++c) {
        v.emplace_back(cases[c].count);
        for (int64_t i = 0; i < cases[c].count; ++i)
          v[c][i] = float((r + 1) * (i % 7 + 1) + s);
      }
      for (size_t c = 0; c < cases.size(); ++c) {
        CollectiveArgs args;
        args.name = cases[c].name;
        args.op = cases[c].op;
        args.prescale = cases[c].prescale;
        args.postscale = cases[c].postscale;
        if (!e->Allreduce({v[c].data(), DataType::kFloat32, {cases[c].count}},
                          args, &hs[c])
                 .ok())
          *fail += "submit;";
      }
      for (size_t c = 0; c < cases.size(); ++c) {
        if (!hs[c].Wait(30).ok()) {
          *fail += std::string("wait ") + cases[c].name + ";";
          continue;
        }
        for (int64_t i = 0; i < cases[c].count; ++i) {
          const float k = float(i % 7 + 1);
          float want = 0;
          switch (cases[c].op) {
            case ReduceOp::kMin:
              want = k + s;
              break;
            case ReduceOp::kMax:
              want = n * k + s;
              break;
            case ReduceOp::kAverage:
              want = (6 * k + n * s) / n;
              break;
            default:
              want = float((6 * k + n * s) * cases[c].prescale *
                           cases[c].postscale);
          }
          if (v[c][i] != want) {
            *fail += std::string(cases[c].name) + " step " + std::to_string(s) +
                     " [" + std::to_string(i) +
                     "] = " + std::to_string(v[c][i]) + ", want " +
                     std::to_string(want) + ";";
            break;
          }
        }
      }
      if (s == 5)
        overdue[r] = e->Metrics().board_overdue - before_late.board_overdue;
    }
    // Rank 0 names the cached tensors by slot on the board: no other
    // path has it do so.
    if (r == 0 && e->Metrics().cache_hits - m0.cache_hits <
                      uint64_t(cases.size()) * (steps - 2))
      *fail += "rank 0 agreed too little on the board;";
    if (!e->Barrier().ok() || !e->Shutdown().ok()) *fail += "end;";
  });
  ExpectEveryRankOk(failures);
  // Step 5: the early ranks' offers went to rank 0 (one of them may follow
  // the other's marks), and the late rank's followed theirs at once.
  EXPECT_GT(overdue[0] + overdue[1], 0u);
  EXPECT_EQ(overdue[2], 0u);
}

// A rank that posted its board round first waits on its doorbell until the
// peer posts 5 ms later; peers ring only a sleeping loop, and a spinning
// one sees the post itself. Returns each rank's median wait in ms: a post
// the waiter missed would leave it waiting until its next look (50 ms or
// more) or through its whole spin window.
std::vector<double> BoardWaitsWithSpin(double spin_us) {
  Knobs knobs;
  knobs.spin_time_us = spin_us;
  const int rounds = 21;
  std::vector<double> median_ms(2);
  const std::vector<std::string> failures = RunRanks(
      2,
      [&](Engine* e, int r, std::string* fail) {
        const EngineMetrics m0 = e->Metrics();
        std::vector<double> ms;
        for (int s = 0; s < rounds; ++s) {
          // The ranks take turns being late (after the first, uncached call).
          if (s > 0 && r == s % 2)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          float v = float(r + 1);
          const auto start = std::chrono::steady_clock::now();
          Handle h;
          CollectiveArgs args;
          args.name = "wake.probe";
          if (!e->Allreduce({&v, DataType::kFloat32, {1}}, args, &h).ok() ||
              !h.Wait(30).ok() || v != 3) {
            *fail += "round " + std::to_string(s) + ";";
            continue;
          }
          if (s > 0 && r != s % 2)  // the early rank: it waited for the post
            ms.push_back(std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - start)
                             .count());
        }
        std::sort(ms.begin(), ms.end());
        median_ms[r] = ms[ms.size() / 2];
        if (r == 0 && e->Metrics().cache_hits - m0.cache_hits < rounds - 2)
          *fail += "rank 0 agreed too little on the board;";
        if (!e->Barrier().ok() || !e->Shutdown().ok()) *fail += "end;";
      },
      knobs);
  ExpectEveryRankOk(failures);
  return median_ms;
}

TEST(Engine, ABoardPostWakesASleepingPeer) {
  const std::vector<double> ms = BoardWaitsWithSpin(0);
  for (int r = 0; r < 2; ++r) EXPECT_LT(ms[r], 25) << "rank " << r;
}

// The post lands within the waiter's spin window (200 ms).
TEST(Engine, ABoardPostEndsASpinningPeersWait) {
  const std::vector<double> ms = BoardWaitsWithSpin(200000);
  for (int r = 0; r < 2; ++r) EXPECT_LT(ms[r], 25) << "rank " << r;
}

// A rank that changes a cached tensor's shape while the others offer it on
// the board gets, like them, the mismatch error from rank 0 (the board
// hands what it cannot agree on to rank 0); the job goes on.
TEST(Engine, ReadyBoardLeavesMismatchesToRankZero) {
  const int n = 2;
  const std::vector<std::string> failures = RunRanks(n, [&](Engine* e, int r,
                                                            std::string* fail) {
    std::vector<float> v(8, 1.f);
    CollectiveArgs args;
    args.name = "shape";
    Handle h;
    for (int s = 0; s < 3; ++s)
      if (!e->Allreduce({v.data(), DataType::kFloat32, {4}}, args, &h).ok() ||
          !h.Wait(30).ok())
        *fail += "cached;";
    const int64_t mine = r == 1 ? 8 : 4;
    Status st;
    if (!e->Allreduce({v.data(), DataType::kFloat32, {mine}}, args, &h).ok() ||
        (st = h.Wait(30)).code() != StatusCode::kMismatch)
      *fail += "no mismatch: " + st.ToString() + ";";
    std::fill(v.begin(), v.end(), 1.f);
    if (!e->Allreduce({v.data(), DataType::kFloat32, {4}}, args, &h).ok() ||
        !h.Wait(30).ok() || v[0] != 2.f)
      *fail += "after;";
    if (!e->Shutdown().ok()) *fail += "end;";
  });
  ExpectEveryRankOk(failures);
}

// A name's queue record remembers the cache slot its tensor was found in,
// so steady steps skip the lookup; that must not outlive the slot. In a
// cache of two, "q0" is found (a hit), then evicted by "q1", whose other
// size then fills its slot, then submitted again; and "p" changes its shape
// now and then. Every result stays exact.
TEST(Engine, RememberedCacheSlotsStandOnlyWhileTheyHold) {
  const int n = 2, steps = 24;
  Knobs knobs;
  knobs.cache_capacity = 2;
  ExpectEveryRankOk(RunRanks(
      n,
      [&](Engine* e, int r, std::string* fail) {
        for (int s = 0; s < steps; ++s) {
          const bool q1 = s % 4 == 2;
          const std::vector<std::string> names = {"p", q1 ? "q1" : "q0"};
          const std::vector<int64_t> counts = {s % 5 == 4 ? 6 : 5, q1 ? 7 : 3};
          std::vector<std::vector<float>> v(names.size());
          std::vector<Handle> hs(names.size());
          for (size_t t = 0; t < names.size(); ++t) {
            v[t].assign(counts[t], float(r + 1 + s + t));
            CollectiveArgs args;
            args.name = names[t];
            if (!e->Allreduce({v[t].data(), DataType::kFloat32, {counts[t]}},
                              args, &hs[t])
                     .ok())
              *fail += "submit;";
          }
          for (size_t t = 0; t < names.size(); ++t) {
            const float want = float(3 + 2 * (s + t));
            if (!hs[t].Wait(30).ok() ||
                std::count(v[t].begin(), v[t].end(), want) != counts[t])
              *fail += names[t] + " step " + std::to_string(s) + ";";
          }
        }
        // Most steps found both tensors cached, on the board.
        const uint64_t hits = e->Metrics().cache_hits;
        if (hits < uint64_t(steps))
          *fail += "only " + std::to_string(hits) + " cache hits;";
        if (!e->Shutdown().ok()) *fail += "end;";
      },
      knobs));
}

// A rank whose knobs rule out the ready board (autotuning, which only rank
// 0 does, is on there alone) while the others' allow one: the shared-memory
// segments disagree, every rank falls back to TCP alike, and cached steps still
// complete everywhere.
TEST(Engine, RanksThatDisagreeOnTheBoardFallBackTogether) {
  const int n = 2;
  const std::vector<std::string> failures = RunRanks(
      n,
      [&](Engine* e, int r, std::string* fail) {
        for (int s = 0; s < 5; ++s) {
          std::vector<float> v(3, float(r + 1));
          CollectiveArgs args;
          args.name = "disagree";
          args.op = ReduceOp::kAverage;
          Handle h;
          if (!e->Allreduce({v.data(), DataType::kFloat32, {3}}, args, &h)
                   .ok() ||
              !h.Wait(30).ok() || v[0] != 1.5f)
            *fail += "step " + std::to_string(s) + ";";
        }
        if (!e->Shutdown().ok()) *fail += "end;";
      },
      [](int r) {
        Knobs k;
        if (r == 1) k.autotune = true;
        return k;
      });
  ExpectEveryRankOk(failures);
}

// Ranks whose knobs would read each other's messages or shared memory
// differently (here the response cache's capacity) are refused at start, on
// every rank, naming the knob, both values and both ranks.
TEST(Engine, RanksWithSettingsThatMustAgreeButDoNotAreRefused) {
  const int n = 3;
  const std::vector<std::string> failures = RunRanks(
      n, [&](Engine*, int, std::string* fail) { *fail += "started;"; },
      [](int r) {
        Knobs k;
        if (r == 2) k.cache_capacity = 16;
        return k;
      });
  for (int r = 0; r < n; ++r) {
    EXPECT_NE(failures[r].find("HOROVOD_CACHE_CAPACITY differs between ranks: "
                               "1024 on rank 0, 16 on rank 2"),
              std::string::npos)
        << "rank " << r << ": " << failures[r];
  }
  // Knobs that are each rank's own may differ.
  ExpectEveryRankOk(RunRanks(
      2, [&](Engine*, int, std::string*) {},
      [](int r) {
        Knobs k;
        k.operation_timeout_s = r == 0 ? 30 : 40;
        k.caller_drives = r == 0;
        return k;
      }));
}

TEST(Engine, WrongSecretIsRefused) {
  const int port = FreePort();
  Status st0, st1;
  std::thread a([&] {
    JobInfo j = LoopbackJob(0, 2, port, "right");
    j.start_timeout_s = 3;
    std::unique_ptr<Engine> e;
    st0 = Engine::Start(j, &e);
  });
  std::thread b([&] {
    JobInfo j = LoopbackJob(1, 2, port, "wrong");
    j.start_timeout_s = 3;
    std::unique_ptr<Engine> e;
    st1 = Engine::Start(j, &e);
  });
  a.join();
  b.join();
  EXPECT_FALSE(st0.ok());
  EXPECT_FALSE(st1.ok());
  EXPECT_NE(st0.message().find("did not connect"), std::string::npos)
      << st0.message();
}

}  // namespace
}  // namespace horovod
