// The public C++ API end to end: three engines in one process (one per
// thread), joined over real authenticated TCP links: deadlock detection,
// mismatches, the framework C table, process sets, Adasum, settings that
// must agree and the job secret.
#include <gtest/gtest.h>
#include <horovod/engine.h>
#include <horovod/framework_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include "engine_ranks.h"

namespace horovod {
namespace {

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

    // Into a result buffer, which comes back for the next result of its
    // size once let go of, and not while held.
    HvdOutput kept{};
    if (api->result_buffer(e, sizeof(a), &kept) != 0 ||
        kept.bytes != sizeof(a) || kept.owner == nullptr)
      *fail += "result buffer;";
    HvdTensor into{kept.data, static_cast<int>(DataType::kFloat32), 1, four, a};
    args.name = "c.into_result";
    api->release(run(args, {into}));
    if (static_cast<const float*>(kept.data)[3] != 27.0f)
      *fail += "result buffer values;";
    HvdOutput held{};
    if (api->result_buffer(e, sizeof(a), &held) != 0 || held.data == kept.data)
      *fail += "a held result buffer handed out again;";
    api->release_output(held.owner);
    api->release_output(kept.owner);
    HvdOutput again{};
    if (api->result_buffer(e, sizeof(a), &again) != 0 ||
        (again.data != kept.data && again.data != held.data))
      *fail += "a let-go result buffer not kept;";
    api->release_output(again.owner);

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
