// Autotuner: rank 0's online search for the engine parameters that give the
// highest throughput (bytes moved per second of wall time) on the job's own
// workload: fusion threshold, cycle time and the small/large allreduce
// crossover. It measures windows of at least `steps_per_sample` steps
// (response lists that moved data) and `min_sample_seconds`, discards the first
// `warmup_samples`, then lets a BayesianOptimizer pick each next setting; after
// `max_samples` it settles on the best and stops. Parameters the user set
// explicitly stay fixed. Every sample is appended to a CSV log when one is
// named.
//
// Pure apart from the log: time comes in as an argument, so tests drive it
// with a synthetic workload. Used by one thread (rank 0's loop).
#ifndef HOROVOD_AUTOTUNE_AUTOTUNER_H_
#define HOROVOD_AUTOTUNE_AUTOTUNER_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "autotune/bayesian_optimizer.h"
#include "common/deadline.h"

namespace horovod {

struct TunedParams {
  int64_t fusion_threshold = 0;
  double cycle_time_ms = 0;
  int64_t small_allreduce_bytes = 0;
};

struct AutotuneConfig {
  bool tune_fusion_threshold = true;
  bool tune_cycle_time = true;
  bool tune_small_allreduce = true;
  int warmup_samples = 3;
  int steps_per_sample = 10;
  // A sample also lasts at least this long, so that it spans several of the
  // job's own steps (a list of responses is often a fraction of one) and
  // measures their throughput rather than one burst.
  double min_sample_seconds = 0.5;
  int max_samples = 20;
  double noise = 0.8;
  std::string log_path;  // "" = no log
  uint64_t seed = 1;
};

class Autotuner {
 public:
  Autotuner(const AutotuneConfig& config, const TunedParams& initial);
  ~Autotuner();
  Autotuner(const Autotuner&) = delete;
  Autotuner& operator=(const Autotuner&) = delete;

  // A step that moved `bytes` ended at `now`. True when params() changed.
  bool Record(int64_t bytes, Clock::time_point now);
  const TunedParams& params() const { return params_; }
  bool done() const { return done_; }

  // The search ranges (log scale), shared with docs/autotune.md.
  static constexpr double kMinFusionLog2 = 16, kMaxFusionLog2 = 28;
  static constexpr double kMinCycleLog10Ms = -1.3, kMaxCycleLog10Ms = 1.3;
  static constexpr double kMinSmallLog2 = 10, kMaxSmallLog2 = 24;

 private:
  std::vector<double> ToUnit(const TunedParams& p) const;
  TunedParams FromUnit(const std::vector<double>& x) const;
  void Log(const char* kind, double score);

  AutotuneConfig config_;
  TunedParams params_;
  int dims_;
  BayesianOptimizer optimizer_;
  std::vector<TunedParams> sampled_;  // by sample, as the optimizer has them
  bool done_ = false;
  int warmup_left_;
  int samples_ = 0;
  int steps_ = 0;
  int64_t bytes_ = 0;
  bool window_open_ = false;
  Clock::time_point window_start_;
  FILE* log_ = nullptr;
};

}  // namespace horovod

#endif  // HOROVOD_AUTOTUNE_AUTOTUNER_H_
