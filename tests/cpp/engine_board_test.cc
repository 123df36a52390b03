// The ready board: cached allreduces agreed in shared memory without rank
// 0's round trip (and by a job of one on its own); exact results, waking
// sleeping and spinning peers, mismatches and disagreements left to rank 0.
#include <gtest/gtest.h>
#include <horovod/engine.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "engine_ranks.h"

namespace horovod {
namespace {

// Cached allreduces agreed on the ready board of `n` ranks (every rank on
// one host, or a job of one): small tensors reduced from the boards, large
// ones fused into collectives, each with its reduce op and scales, in
// either order; exact results every step. With three ranks, also when one rank
// submits later than the board waits (they go through rank 0: an early rank's
// offers wait out the patience, the late rank's follow at once).
void CheckBoardSteps(int n) {
  const int steps = 12;
  const float ranks_sum = float(n * (n + 1) / 2);  // of the (r + 1) below
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
      if (s == 5 && r == 2 && n == 3)
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::vector<std::vector<float>> v;
      std::vector<Handle> hs(cases.size());
      for (size_t c = 0; c < cases.size(); ++c) {
        v.emplace_back(cases[c].count);
        for (int64_t i = 0; i < cases[c].count; ++i)
          v[c][i] = float((r + 1) * (i % 7 + 1) + s);
      }
      // Odd steps submit in reverse: the offers' slots then descend.
      for (size_t k = 0; k < cases.size(); ++k) {
        const size_t c = s % 2 ? cases.size() - 1 - k : k;
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
              want = (ranks_sum * k + n * s) / n;
              break;
            default:
              want = float((ranks_sum * k + n * s) * cases[c].prescale *
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
  if (n != 3) return;
  // Step 5: the early ranks' offers went to rank 0 (one of them may follow
  // the other's marks), and the late rank's followed theirs at once.
  EXPECT_GT(overdue[0] + overdue[1], 0u);
  EXPECT_EQ(overdue[2], 0u);
}

TEST(Engine, ReadyBoardStepsGiveExactResults) { CheckBoardSteps(3); }

// A job of one agrees with itself on a board in its own memory, every round
// as it is posted, instead of through its coordinator.
TEST(Engine, AOneRankJobAgreesOnABoardOfItsOwn) { CheckBoardSteps(1); }

// Board rounds that agree on the same slots as the board round before
// reuse its fusion; cached tensors that changed in between (their shapes,
// then their op, refiled in their slots by rank 0) must not run as they
// were. Each phase's first step goes through rank 0, the rest on the
// board, with a scalar's round between steps; every step's results are
// exact.
TEST(Engine, BoardRoundsFollowTensorsThatChanged) {
  struct Phase {
    int64_t x_count;  // y has 2000 more
    ReduceOp x_op;    // and y's
  };
  const std::vector<Phase> phases = {{5000, ReduceOp::kSum},
                                     {6000, ReduceOp::kSum},
                                     {6000, ReduceOp::kAverage},
                                     {5000, ReduceOp::kAverage}};
  const int steps = 4;
  const std::vector<std::string> failures = RunRanks(2, [&](Engine* e, int r,
                                                            std::string* fail) {
    const EngineMetrics m0 = e->Metrics();
    for (size_t p = 0; p < phases.size(); ++p)
      for (int s = 0; s < steps; ++s) {
        std::vector<float> x(phases[p].x_count, float(r + 1 + s));
        const int64_t y_count = phases[p].x_count + 2000;
        std::vector<float> y(y_count, float(r + 1));
        Handle hx, hy;
        CollectiveArgs args;
        args.name = "changes.x";
        args.op = phases[p].x_op;
        const bool sent =
            e->Allreduce({x.data(), DataType::kFloat32, {phases[p].x_count}},
                         args, &hx)
                .ok();
        args.name = "changes.y";
        if (!sent ||
            !e->Allreduce({y.data(), DataType::kFloat32, {y_count}}, args, &hy)
                 .ok() ||
            !hx.Wait(30).ok() || !hy.Wait(30).ok()) {
          *fail +=
              "phase " + std::to_string(p) + " step " + std::to_string(s) + ";";
          continue;
        }
        const float sum = float(3 + 2 * s);
        const float want = phases[p].x_op == ReduceOp::kSum ? sum : sum / 2;
        for (size_t i = 0; i < x.size(); ++i)
          if (x[i] != want) {
            *fail += "phase " + std::to_string(p) + " step " +
                     std::to_string(s) + " x[" + std::to_string(i) +
                     "] = " + std::to_string(x[i]) + ";";
            break;
          }
        const float y_want = phases[p].x_op == ReduceOp::kSum ? 3.f : 1.5f;
        if (std::count(y.begin(), y.end(), y_want) != y_count)
          *fail += "phase " + std::to_string(p) + " step " + std::to_string(s) +
                   " y;";
        // A round of its own between steps, carried on the board.
        float one = 1;
        Handle h1;
        args.name = "changes.scalar";
        args.op = ReduceOp::kSum;
        if (!e->Allreduce({&one, DataType::kFloat32, {1}}, args, &h1).ok() ||
            !h1.Wait(30).ok() || one != 2)
          *fail += "scalar;";
      }
    // Most steps agreed on the board (a phase's first goes by rank 0).
    if (r == 0 && e->Metrics().cache_hits - m0.cache_hits <
                      uint64_t(2 * phases.size() * (steps - 2)))
      *fail += "rank 0 agreed too little on the board;";
    if (!e->Barrier().ok() || !e->Shutdown().ok()) *fail += "end;";
  });
  ExpectEveryRankOk(failures);
}

// A name submitted step after step with the same parameters is queued again
// as its record holds it; what the record cannot vouch for is still checked
// and changed parameters still take effect: a step without data or on a
// device is refused (naming the rank) and the job goes on, an out-of-place
// step and a scaled one give their exact results.
TEST(Engine, ASteadySubmissionIsStillCheckedAndFollowsItsParameters) {
  const int n = 2;
  ExpectEveryRankOk(RunRanks(n, [&](Engine* e, int r, std::string* fail) {
    auto run = [&](int step, TensorView view, const CollectiveArgs& args,
                   const std::vector<float>& out, float want) {
      Handle h;
      Status st = e->Allreduce(view, args, &h);
      if (!st.ok() || !(st = h.Wait(30)).ok() ||
          std::count(out.begin(), out.end(), want) != int64_t(out.size()))
        *fail += "step " + std::to_string(step) + " " + st.message() + ";";
    };
    auto refused = [&](TensorView view, const CollectiveArgs& args,
                       const char* what) {
      Handle h;
      const Status st = e->Allreduce(view, args, &h);
      if (st.ok() || st.message().find(what) == std::string::npos ||
          st.message().find("rank " + std::to_string(r)) == std::string::npos)
        *fail += std::string("not refused: ") + what + ";";
    };
    CollectiveArgs args;
    args.name = "steady.g";
    std::vector<float> v(6), in(6, float(r + 1));
    for (int s = 0; s < 12; ++s) {
      v.assign(6, float(r + 1 + s));
      TensorView view{v.data(), DataType::kFloat32, {6}};
      if (s == 4) refused({nullptr, DataType::kFloat32, {6}}, args, "no data");
      if (s == 5) {
        view.device = 0;
        refused(view, args, "only CPU tensors");
        view.device = -1;
      }
      if (s == 6 || s == 7) view.input = in.data();  // the result goes to v
      args.prescale = s == 9 ? 2.0 : 1.0;
      const float want = (s == 6 || s == 7) ? 3.f : float(3 + 2 * s);
      run(s, view, args, v, s == 9 ? 2 * want : want);
    }
    if (!e->Barrier().ok() || !e->Shutdown().ok()) *fail += "end;";
  }));
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

// A caller in steady lean steps (a scalar on the board, call after call)
// still serves what the board does not carry: another thread's broadcasts
// go to rank 0 and complete, on every rank, with exact results on both
// sides, and the job goes on.
TEST(Engine, ACallersLeanStepsStillServeWorkOffTheBoard) {
  const int n = 2, scalars = 2000, broadcasts = 20;
  const std::vector<std::string> failures = RunRanks(n, [&](Engine* e, int r,
                                                            std::string* fail) {
    std::string side;  // the broadcasting thread's report
    std::thread other([&] {
      for (int b = 0; b < broadcasts; ++b) {
        std::vector<int32_t> v(5, r == 1 ? b : -1);
        CollectiveArgs args;
        args.name = "lean.bcast";
        args.root = 1;
        Handle h;
        if (!e->Broadcast({v.data(), DataType::kInt32, {5}}, args, &h).ok() ||
            !h.Wait(30).ok() || v[4] != b)
          side += "broadcast " + std::to_string(b) + ";";
      }
    });
    for (int s = 0; s < scalars; ++s) {
      float x = float(r + s);
      CollectiveArgs args;
      args.name = "lean.scalar";
      Handle h;
      if (!e->Allreduce({&x, DataType::kFloat32, {1}}, args, &h).ok() ||
          !h.Wait(30).ok() || x != float(2 * s + 1)) {
        *fail += "scalar " + std::to_string(s) + ";";
        break;
      }
    }
    other.join();
    *fail += side;
    if (!e->Barrier().ok() || !e->Shutdown().ok()) *fail += "end;";
  });
  ExpectEveryRankOk(failures);
}

// An offer made while our round is open waits for the next round: rank 0
// posts A alone (a short wait drives its loop), then submits B while that
// round is open; rank 1 posts A a little later, and the round agrees on A
// alone. B must be neither lost nor run twice: every step completes with
// exact results.
TEST(Engine, AnOfferMadeWhileItsRoundIsOpenWaitsForTheNextRound) {
  const int n = 2, count = 5000, steps = 40;
  const std::vector<std::string> failures = RunRanks(n, [&](Engine* e, int r,
                                                            std::string* fail) {
    std::vector<float> a(count), b(count);
    auto submit = [&](const char* name, std::vector<float>& v, float base,
                      Handle* h) {
      for (int i = 0; i < count; ++i) v[i] = base + float(r + i % 5);
      CollectiveArgs args;
      args.name = name;
      if (!e->Allreduce({v.data(), DataType::kFloat32, {count}}, args, h).ok())
        *fail += std::string("submit ") + name + ";";
    };
    auto check = [&](const char* name, std::vector<float>& v, float base,
                     Handle& h, int step) {
      if (!h.Wait(20).ok()) {
        *fail +=
            std::string("wait ") + name + " step " + std::to_string(step) + ";";
        return false;
      }
      for (int i = 0; i < count; ++i)
        if (v[i] != 2 * base + float(1 + 2 * (i % 5))) {
          *fail += std::string(name) + " step " + std::to_string(step) + ";";
          return false;
        }
      return true;
    };
    for (int s = 0; s < steps; ++s) {
      Handle ha, hb;
      const float base = float(s);
      // Cached first: the board carries cached tensors only.
      const bool staggered = s >= 2;
      if (staggered && r == 1)
        std::this_thread::sleep_for(std::chrono::microseconds(1500));
      submit("open.a", a, base, &ha);
      // Drives the loop until it has posted A (the wait times out: rank 1
      // has not come yet).
      if (staggered) (void)ha.Wait(r == 0 ? 0.0005 : 0.002);
      submit("open.b", b, base + 0.5f, &hb);
      if (!check("open.a", a, base, ha, s) ||
          !check("open.b", b, base + 0.5f, hb, s))
        break;
    }
    if (!e->Barrier().ok() || !e->Shutdown().ok()) *fail += "end;";
  });
  ExpectEveryRankOk(failures);
}

}  // namespace
}  // namespace horovod
