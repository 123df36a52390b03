// Engine::Metrics: the work counted between two snapshots and the loop's
// time split by phase, over shared memory and TCP.
#include <gtest/gtest.h>
#include <horovod/engine.h>

#include <chrono>

#include "engine_ranks.h"

namespace horovod {
namespace {

// The metrics count the work done between two snapshots and split the
// loop's time by phase: with shared memory the fused tensors are reduced
// where they lie (no copies), and over TCP those large enough for the ring
// too; smaller ones pass through the fusion buffer.
void CheckMetrics(bool shm, bool grouped = false, int64_t count = 16 << 10) {
  const int n = 3, steps = 10, per_step = 3;
  // 16K float32 a tensor fuse to 192 KiB, past the ring's 64 KiB.
  const bool copies = !shm && count * 4 * per_step < (64 << 10);
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
        expect(copies ? m.copy_s > m0.copy_s : m.copy_s == m0.copy_s,
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

TEST(Engine, MetricsCountTheFusionBuffersCopiesTcp) {
  CheckMetrics(false, false, 1 << 10);
}

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

}  // namespace
}  // namespace horovod
