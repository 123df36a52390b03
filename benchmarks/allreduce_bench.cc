// Allreduce(float32, Sum) through the public C++ Engine API, measured with
// the anchors' method (../shared/bench/README.md) so our RESULT lines sit in
// the same table as OpenMPI, Gloo and torch.distributed:
//   per size: 3 warm-up calls, doubling calibration until a batch takes
//   >= 10 ms; one exact correctness check on fresh input; trials of `iters`
//   back-to-back calls (>= 20 ms each, 5..50 trials within the budget), each
//   after a barrier, trial time = max over ranks; median and min per call,
//   algbw = bytes / median, busbw = algbw * 2(n-1)/n, GB = 1e9 bytes.
// Every call goes through negotiation, the response cache and the executor,
// as a training step's would. In place (Horovod semantics).
//
//   horovodrun -np 2 build/benchmarks/allreduce_bench -l hvd-shm [-s 4,1M]
//   [-b 1.5]
// With -f COUNTxBYTES (e.g. 1000x4K, -n STEPS, 100 by default) it measures
// tensor fusion instead:
// COUNT tensors submitted one call each per step, then waited for, against
// one tensor of the same total size, their steps interleaved in blocks of
// ten (then that tensor with COUNT 4-byte ones beside it); it prints
//   FUSION,<np>,cpp:<case>,<median_step_us>,<min_step_us>
// (cpp-<label>:<case> under -l <label>)
// with the step time the max over ranks (as benchmarks/fusion_bench.py),
// and per rank a PHASES line: the engine's metrics per step, and the
// median time the step's submissions took. -F runs the
// COUNT-tensor case alone.
//
// Built where valgrind's headers are installed, the timed steps are
// bracketed for callgrind: under `valgrind --tool=callgrind
// --instr-atstart=no` it counts those steps alone, one dump for the
// interleaved cases and one for the last (with -F, one for its case).
// Instruction counts do not depend on how busy the host is.
#include <horovod/engine.h>
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HVD_BENCH_CALLGRIND 1
#endif
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using horovod::CollectiveArgs;
using horovod::DataType;
using horovod::Engine;
using horovod::Handle;
using horovod::ReduceOp;
using horovod::Status;
using horovod::TensorView;

const size_t kDefaultSizes[] = {4,         64,       1 << 10, 16 << 10,
                                256 << 10, 1 << 20,  4 << 20, 16 << 20,
                                64 << 20,  256 << 20};

// Untimed steps of each fusion case before its timed ones: a process's
// first tens of milliseconds of steps run slower on this host.
constexpr int kFusionWarmups = 20;
// Steps of one fusion case before the next case's (TimeInterleaved).
constexpr int kFusionBlock = 10;

size_t ParseSize(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1 << 10;
      break;
    case 'M':
    case 'm':
      v *= 1 << 20;
      break;
    case 'G':
    case 'g':
      v *= 1 << 30;
      break;
  }
  return static_cast<size_t>(v);
}

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Check(const Status& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s failed: %s\n", what, st.ToString().c_str());
    std::exit(1);
  }
}

class Bench {
 public:
  explicit Bench(Engine* e) : e_(e) {}

  // As a caller that submits the same tensor every step would: the view
  // and the args are rewritten in place, so their shape and name keep
  // their capacity (OpenMPI's harness passes a pointer and a count).
  void Allreduce(void* data, DataType dtype, int64_t count, ReduceOp op,
                 const char* name) {
    Aim(&view_, data, dtype, count);
    args_.name = name;
    args_.op = op;
    Handle h;
    Check(e_->Allreduce(view_, args_, &h), "allreduce");
    Check(h.Wait(), "allreduce");
  }

  // The maximum over ranks, as every rank sees it.
  double Max(double v) {
    Allreduce(&v, DataType::kFloat64, 1, ReduceOp::kMax, "bench.max");
    return v;
  }

  void Barrier() { Check(e_->Barrier(0), "barrier"); }

  horovod::EngineMetrics Metrics() const { return e_->Metrics(); }

  // One step: every tensor submitted, then every handle waited for. The
  // seconds the submissions took (this rank's) go to *submit, if given.
  void Step(std::vector<std::vector<float>>& tensors,
            const std::vector<std::string>& names, double* submit = nullptr) {
    const double t0 = submit != nullptr ? Now() : 0;
    handles_.resize(tensors.size());
    // As a framework's adapter would: each tensor described afresh in one
    // view and one args, rewritten in place (keeping their capacity).
    args_.op = ReduceOp::kSum;  // Max may have left kMax there
    for (size_t i = 0; i < tensors.size(); ++i) {
      Aim(&view_, tensors[i].data(), DataType::kFloat32,
          static_cast<int64_t>(tensors[i].size()));
      args_.name = names[i];
      Check(e_->Allreduce(view_, args_, &handles_[i]), "allreduce");
    }
    if (submit != nullptr) *submit = Now() - t0;
    for (Handle& h : handles_) Check(h.Wait(), "allreduce");
  }

 private:
  // Points `v` at a 1-D tensor, its shape rewritten within its capacity.
  static void Aim(TensorView* v, void* data, DataType dtype, int64_t count) {
    v->data = data;
    v->dtype = dtype;
    v->shape.assign(1, count);
  }

  Engine* e_;
  TensorView view_;
  CollectiveArgs args_;
  std::vector<Handle> handles_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Under callgrind, counts instructions between Resume and Pause only,
// from zero at Begin to the dump at End.
void BeginCounting() {
#ifdef HVD_BENCH_CALLGRIND
  CALLGRIND_ZERO_STATS;
#endif
}

void ResumeCounting() {
#ifdef HVD_BENCH_CALLGRIND
  CALLGRIND_START_INSTRUMENTATION;
#endif
}

void PauseCounting() {
#ifdef HVD_BENCH_CALLGRIND
  CALLGRIND_STOP_INSTRUMENTATION;
#endif
}

void EndCounting(const std::string& what) {
#ifdef HVD_BENCH_CALLGRIND
  CALLGRIND_DUMP_STATS_AT(what.c_str());
#else
  (void)what;
#endif
}

// One case of the fusion benchmark: its tensors and names, and what its
// timed steps took.
struct FusionRun {
  std::string label;
  std::vector<std::vector<float>> tensors;
  std::vector<std::string> names;
  std::vector<double> times, submits;
  horovod::EngineMetrics phases;  // summed over the timed steps
};

// A case of tensors of the sizes `each` (bytes), submitted every step.
FusionRun MakeRun(const std::string& label, const std::vector<size_t>& each) {
  FusionRun run;
  run.label = label;
  const size_t n = each.size();
  run.tensors.resize(n);
  run.names.resize(n);
  for (size_t i = 0; i < n; ++i) {
    run.tensors[i].assign(std::max<size_t>(1, each[i] / sizeof(float)), 0.f);
    run.names[i] = "fusion." + label + "." + std::to_string(i);
  }
  return run;
}

// The loop's phases between two snapshots, added to *sum.
void AddPhases(horovod::EngineMetrics* sum, const horovod::EngineMetrics& a,
               const horovod::EngineMetrics& b) {
  sum->cycles += b.cycles - a.cycles;
  sum->responses += b.responses - a.responses;
  sum->idle_s += b.idle_s - a.idle_s;
  sum->negotiate_s += b.negotiate_s - a.negotiate_s;
  sum->bookkeeping_s += b.bookkeeping_s - a.bookkeeping_s;
  sum->copy_s += b.copy_s - a.copy_s;
  sum->transfer_s += b.transfer_s - a.transfer_s;
  sum->wait_s += b.wait_s - a.wait_s;
}

// Times `steps` steps of each run, interleaved in blocks of
// kFusionBlock: a host whose speed drifts from one moment to the next then
// weighs on every case alike, and no case alone pays for the process's
// first milliseconds (one case after another timed the first one slower
// than the same case run later). Within a block a case runs as a training
// loop would, its data where the step before left it; only the first step
// of a block follows another case's. Under callgrind the steps are counted
// with the barrier before and the maximum after each, in one dump named
// after the runs.
void TimeInterleaved(Bench& bench, const std::vector<FusionRun*>& runs,
                     int warmups, int steps) {
  for (FusionRun* run : runs)
    for (int w = 0; w < warmups; ++w) bench.Step(run->tensors, run->names);
  std::string labels;
  for (FusionRun* run : runs) {
    run->submits.assign(steps, 0);
    labels += (labels.empty() ? "" : "+") + run->label;
  }
  BeginCounting();
  for (int block = 0; block < steps; block += kFusionBlock)
    for (FusionRun* run : runs)
      for (int s = block; s < std::min(steps, block + kFusionBlock); ++s) {
        const horovod::EngineMetrics before = bench.Metrics();
        ResumeCounting();
        bench.Barrier();
        const double t0 = Now();
        bench.Step(run->tensors, run->names, &run->submits[s]);
        run->times.push_back(bench.Max(Now() - t0));
        PauseCounting();
        AddPhases(&run->phases, before, bench.Metrics());
      }
  EndCounting(labels);
}

// The run's PHASES line (this rank's loop, per step: the barrier and the
// maximum after each step are in it too) and, on rank 0, its FUSION line.
void Report(const FusionRun& run, const std::string& tag, int rank, int np) {
  const horovod::EngineMetrics& m = run.phases;
  const double steps = static_cast<double>(run.times.size());
  std::printf(
      "PHASES,%d,%s%s,rank %d,lists %.1f,responses %.1f,idle %.0f,"
      "negotiate %.0f,"
      "bookkeeping %.0f,copy %.0f,transfer %.0f,wait %.0f us,"
      "submit median %.1f us\n",
      np, tag.c_str(), run.label.c_str(), rank, double(m.cycles) / steps,
      double(m.responses) / steps, m.idle_s / steps * 1e6,
      m.negotiate_s / steps * 1e6, m.bookkeeping_s / steps * 1e6,
      m.copy_s / steps * 1e6, m.transfer_s / steps * 1e6,
      m.wait_s / steps * 1e6, Median(run.submits) * 1e6);
  std::fflush(stdout);
  if (rank == 0) {
    std::printf("FUSION,%d,%s%s,%.1f,%.1f\n", np, tag.c_str(),
                run.label.c_str(), Median(run.times) * 1e6,
                *std::min_element(run.times.begin(), run.times.end()) * 1e6);
    std::fflush(stdout);
  }
}

// `tag` prefixes the case names ("cpp:", or "cpp-LABEL:" under -l LABEL);
// `many_only` runs the COUNT-tensor case alone.
void FusionCase(Bench& bench, const std::string& tag, int rank, int np,
                int count, size_t bytes, int steps, bool many_only) {
  const size_t kib = bytes >> 10;
  const std::string one_label = "1x" + std::to_string(count * kib) + "KiB";
  FusionRun many =
      MakeRun(std::to_string(count) + "x" + std::to_string(kib) + "KiB",
              std::vector<size_t>(count, bytes));
  if (many_only) {
    TimeInterleaved(bench, {&many}, kFusionWarmups, steps);
    Report(many, tag, rank, np);
    return;
  }
  // The one tensor and the COUNT tensors in alternating blocks: the ratio
  // of their steps is the fusion's cost.
  FusionRun one = MakeRun(one_label, {count * bytes});
  TimeInterleaved(bench, {&one, &many}, kFusionWarmups, steps);
  Report(one, tag, rank, np);
  Report(many, tag, rank, np);
  // The large tensor again with `count` 4-byte ones beside it (carried on
  // the ready board, not fused with it): its transfer time against the
  // first case's shows what the small tensors' bookkeeping costs the data
  // movement through the caches. Timed on its own, after the others: its
  // tensors and the others' together would overflow the response cache.
  std::vector<size_t> sizes(count + 1, 4);
  sizes[0] = count * bytes;
  FusionRun mixed =
      MakeRun(one_label + "+" + std::to_string(count) + "x4B", sizes);
  TimeInterleaved(bench, {&mixed}, kFusionWarmups, steps);
  Report(mixed, tag, rank, np);
}

}  // namespace

int main(int argc, char** argv) {
  std::string label = "hvd";
  double budget = 1.5;
  int fusion_count = 0;
  size_t fusion_bytes = 0;
  int fusion_steps = 100;
  bool many_only = false;
  std::vector<size_t> sizes(std::begin(kDefaultSizes), std::end(kDefaultSizes));
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "-l" && a + 1 < argc) {
      label = argv[++a];
    } else if (arg == "-b" && a + 1 < argc) {
      budget = std::atof(argv[++a]);
    } else if (arg == "-f" && a + 1 < argc) {
      std::string spec = argv[++a];
      size_t x = spec.find('x');
      if (x == std::string::npos) {
        std::fprintf(stderr, "-f wants COUNTxBYTES, got %s\n", spec.c_str());
        return 2;
      }
      fusion_count = std::atoi(spec.substr(0, x).c_str());
      fusion_bytes = ParseSize(spec.substr(x + 1));
    } else if (arg == "-F") {
      many_only = true;
    } else if (arg == "-n" && a + 1 < argc) {
      fusion_steps = std::max(1, std::atoi(argv[++a]));
    } else if (arg == "-s" && a + 1 < argc) {
      sizes.clear();
      std::string list = argv[++a];
      size_t pos = 0;
      while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        sizes.push_back(ParseSize(list.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else {
      std::fprintf(
          stderr,
          "usage: %s [-l LABEL] [-s SIZES] [-b SECONDS] [-f COUNTxBYTES [-n "
          "STEPS] [-F]]\n",
          argv[0]);
      return 2;
    }
  }

  horovod::JobInfo job;
  Check(horovod::JobInfo::FromEnvironment(&job), "job");
  std::unique_ptr<Engine> engine;
  Check(Engine::Start(job, &engine), "init");
  const int rank = engine->rank(), np = engine->size();
  Bench bench(engine.get());
  if (fusion_count > 0) {
    const std::string tag = label == "hvd" ? "cpp:" : "cpp-" + label + ":";
    FusionCase(bench, tag, rank, np, fusion_count, fusion_bytes, fusion_steps,
               many_only);
    return 0;
  }
  if (rank == 0) {
    std::printf(
        "# %s np=%d inplace=1 budget=%.2fs lib=\"horovod-cpp engine\"\n",
        label.c_str(), np, budget);
    std::printf("# %12s %8s %7s %12s %12s %10s %10s %s\n", "bytes", "iters",
                "trials", "median_us", "min_us", "algbw_GB/s", "busbw_GB/s",
                "check");
    std::fflush(stdout);
  }

  for (size_t requested : sizes) {
    const int64_t count = std::max<int64_t>(1, requested / sizeof(float));
    const size_t bytes = count * sizeof(float);
    std::vector<float> buf(count);
    auto fill = [&] {
      for (int64_t i = 0; i < count; ++i)
        buf[i] = static_cast<float>((rank + 1) * (i % 7 + 1));
    };
    auto call = [&] {
      bench.Allreduce(buf.data(), DataType::kFloat32, count, ReduceOp::kSum,
                      "bench.x");
    };
    fill();
    for (int w = 0; w < 3; ++w) call();
    double one = 0;
    for (int n = 1;; n *= 2) {
      bench.Barrier();
      double t0 = Now();
      for (int w = 0; w < n; ++w) call();
      double el = bench.Max(Now() - t0);
      if (el >= 0.01 || n >= (1 << 20)) {
        one = el / n;
        break;
      }
    }

    fill();
    call();
    const float tri = static_cast<float>(np * (np + 1) / 2);
    double bad = 0;
    for (int64_t i = 0; i < count; ++i)
      if (buf[i] != tri * static_cast<float>(i % 7 + 1)) bad += 1;
    bad = bench.Max(bad);
    std::memset(buf.data(), 0, bytes);  // keep the timed values bounded

    // Every rank computes the plan from the same (max-reduced) estimate.
    int iters =
        std::min(100000, static_cast<int>(0.02 / std::max(one, 1e-9)) + 1);
    int trials = std::clamp(
        static_cast<int>(budget / std::max(iters * one, 1e-9)), 5, 50);
    std::vector<double> per_call(trials);
    for (int tr = 0; tr < trials; ++tr) {
      bench.Barrier();
      double t0 = Now();
      for (int it = 0; it < iters; ++it) call();
      per_call[tr] = (Now() - t0) / iters;
    }
    for (double& t : per_call) t = bench.Max(t);
    if (rank == 0) {
      std::sort(per_call.begin(), per_call.end());
      double med =
          trials % 2 ? per_call[trials / 2]
                     : 0.5 * (per_call[trials / 2 - 1] + per_call[trials / 2]);
      double algbw = bytes / med / 1e9;
      double busbw = algbw * 2.0 * (np - 1) / np;
      const char* ok = bad > 0 ? "FAIL" : "OK";
      std::printf("  %12zu %8d %7d %12.2f %12.2f %10.3f %10.3f %s\n", bytes,
                  iters, trials, med * 1e6, per_call[0] * 1e6, algbw, busbw,
                  ok);
      std::printf("RESULT,%s,%d,%zu,%d,%d,%.3f,%.3f,%.4f,%.4f,%s\n",
                  label.c_str(), np, bytes, iters, trials, med * 1e6,
                  per_call[0] * 1e6, algbw, busbw, ok);
      std::fflush(stdout);
    }
  }
  return 0;
}
