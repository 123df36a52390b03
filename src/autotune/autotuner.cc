#include "autotune/autotuner.h"

#include <algorithm>
#include <cmath>

#include "common/logging.h"

namespace horovod {
namespace {

double ToRange(double v, double lo, double hi) {
  return std::clamp((v - lo) / (hi - lo), 0.0, 1.0);
}

double FromRange(double u, double lo, double hi) { return lo + u * (hi - lo); }

}  // namespace

Autotuner::Autotuner(const AutotuneConfig& config, const TunedParams& initial)
    : config_(config),
      params_(initial),
      dims_(config.tune_fusion_threshold + config.tune_cycle_time +
            config.tune_small_allreduce),
      optimizer_(std::max(dims_, 1), config.noise, config.seed),
      done_(dims_ == 0),
      warmup_left_(config.warmup_samples) {
  if (config_.log_path.empty()) return;
  log_ = std::fopen(config_.log_path.c_str(), "w");
  if (log_ == nullptr) {
    HVD_LOG(kWarning,
            "cannot write the autotune log '" << config_.log_path << "'");
    return;
  }
  std::fprintf(log_,
               "sample,kind,fusion_threshold_bytes,cycle_time_ms,"
               "small_allreduce_bytes,score_bytes_per_s\n");
  std::fflush(log_);
}

Autotuner::~Autotuner() {
  if (log_ != nullptr) std::fclose(log_);
}

std::vector<double> Autotuner::ToUnit(const TunedParams& p) const {
  std::vector<double> x;
  if (config_.tune_fusion_threshold)
    x.push_back(ToRange(std::log2(std::max<double>(p.fusion_threshold, 1)),
                        kMinFusionLog2, kMaxFusionLog2));
  if (config_.tune_cycle_time)
    x.push_back(ToRange(std::log10(std::max(p.cycle_time_ms, 1e-3)),
                        kMinCycleLog10Ms, kMaxCycleLog10Ms));
  if (config_.tune_small_allreduce)
    x.push_back(ToRange(std::log2(std::max<double>(p.small_allreduce_bytes, 1)),
                        kMinSmallLog2, kMaxSmallLog2));
  return x;
}

TunedParams Autotuner::FromUnit(const std::vector<double>& x) const {
  TunedParams p = params_;
  size_t i = 0;
  if (config_.tune_fusion_threshold)
    p.fusion_threshold =
        static_cast<int64_t>(
            std::exp2(FromRange(x[i++], kMinFusionLog2, kMaxFusionLog2)) /
            1024) *
        1024;
  if (config_.tune_cycle_time)
    p.cycle_time_ms =
        std::round(std::pow(10.0, FromRange(x[i++], kMinCycleLog10Ms,
                                            kMaxCycleLog10Ms)) *
                   1000) /
        1000;
  if (config_.tune_small_allreduce)
    p.small_allreduce_bytes = static_cast<int64_t>(
        std::exp2(FromRange(x[i++], kMinSmallLog2, kMaxSmallLog2)));
  return p;
}

void Autotuner::Log(const char* kind, double score) {
  if (log_ == nullptr) return;
  std::fprintf(log_, "%d,%s,%lld,%.3f,%lld,%.0f\n", samples_, kind,
               static_cast<long long>(params_.fusion_threshold),
               params_.cycle_time_ms,
               static_cast<long long>(params_.small_allreduce_bytes), score);
  std::fflush(log_);
}

bool Autotuner::Record(int64_t bytes, Clock::time_point now) {
  if (done_ || bytes <= 0) return false;
  if (!window_open_) {  // the first window starts with the first step
    window_open_ = true;
    window_start_ = now;
    return false;
  }
  bytes_ += bytes;
  const double seconds = std::max(
      std::chrono::duration<double>(now - window_start_).count(), 1e-9);
  if (++steps_ < config_.steps_per_sample ||
      seconds < config_.min_sample_seconds)
    return false;
  const double score = static_cast<double>(bytes_) / seconds;
  window_start_ = now;
  steps_ = 0;
  bytes_ = 0;
  if (warmup_left_ > 0) {
    --warmup_left_;
    Log("warmup", score);
    return false;
  }
  ++samples_;
  Log("sample", score);
  optimizer_.AddSample(ToUnit(params_), score);
  sampled_.push_back(params_);
  if (samples_ >= config_.max_samples) {
    const int best = optimizer_.Best();
    params_ = sampled_[best];  // exactly as measured, not re-rounded
    done_ = true;
    Log("best", optimizer_.y(best));
    return true;
  }
  params_ = FromUnit(optimizer_.Next());
  return true;
}

}  // namespace horovod
