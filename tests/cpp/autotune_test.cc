#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "autotune/autotuner.h"
#include "autotune/bayesian_optimizer.h"
#include "autotune/gaussian_process.h"

namespace horovod {
namespace {

TEST(GaussianProcess, InterpolatesAndIsUnsureFarFromData) {
  GaussianProcess gp(0.2, 1e-6);
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (int i = 0; i <= 10; ++i) {
    x.push_back({i / 20.0});  // data on [0, 0.5] only
    y.push_back(std::sin(6 * i / 20.0) * 100 + 50);
  }
  ASSERT_TRUE(gp.Fit(x, y));
  double mean, var_near, var_far;
  gp.Predict({0.225}, &mean, &var_near);
  EXPECT_NEAR(mean, std::sin(6 * 0.225) * 100 + 50, 2.0);
  gp.Predict({1.0}, &mean, &var_far);
  EXPECT_GT(var_far, 100 * var_near);
}

TEST(BayesianOptimizer, ExpectedImprovement) {
  // No uncertainty: the plain improvement.
  EXPECT_DOUBLE_EQ(BayesianOptimizer::ExpectedImprovement(5, 0, 3), 2);
  EXPECT_DOUBLE_EQ(BayesianOptimizer::ExpectedImprovement(1, 0, 3), 0);
  // At the best with unit variance: sigma * pdf(0).
  EXPECT_NEAR(BayesianOptimizer::ExpectedImprovement(3, 1, 3),
              1 / std::sqrt(2 * M_PI), 1e-12);
  // More uncertainty, more expected improvement.
  EXPECT_GT(BayesianOptimizer::ExpectedImprovement(2, 4, 3),
            BayesianOptimizer::ExpectedImprovement(2, 1, 3));
}

TEST(BayesianOptimizer, FindsTheMaximumOfANoisyFunction) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0, 0.02);
  auto f = [](const std::vector<double>& x) {
    return std::exp(
        -20 * ((x[0] - 0.7) * (x[0] - 0.7) + (x[1] - 0.3) * (x[1] - 0.3)));
  };
  BayesianOptimizer opt(2, 0.05, 3);
  std::vector<double> x = {0.1, 0.9};
  for (int i = 0; i < 25; ++i) {
    opt.AddSample(x, f(x) + noise(rng));
    x = opt.Next();
  }
  EXPECT_GT(f(opt.x(opt.Best())), 0.9);
}

// Throughput of a synthetic job, peaking at 4 MiB fusion, 0.5 ms cycle and
// a 64 KiB crossover.
double Throughput(const TunedParams& p) {
  double f = (std::log2(p.fusion_threshold) - 22) / 3;
  double c = (std::log10(p.cycle_time_ms) - std::log10(0.5)) / 1.0;
  double s = (std::log2(p.small_allreduce_bytes) - 16) / 4;
  return 1e9 * std::exp(-(f * f + c * c + s * s));
}

// Runs the tuner on the synthetic job; returns its settled parameters.
TunedParams Tune(Autotuner& tuner, int max_steps, int* changes) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> jitter(1, 0.03);
  Clock::time_point now{};
  *changes = 0;
  for (int step = 0; step < max_steps && !tuner.done(); ++step) {
    const int64_t bytes = 1 << 20;
    now += std::chrono::nanoseconds(static_cast<int64_t>(
        1e9 * bytes / Throughput(tuner.params()) * jitter(rng)));
    if (tuner.Record(bytes, now)) ++*changes;
    tuner.Record(0, now);  // steps that moved nothing do not count
  }
  return tuner.params();
}

TEST(Autotuner, ReachesNearTheBestThroughputAndLogsEverySample) {
  const std::string log =
      ::testing::TempDir() + "autotune" + std::to_string(getpid()) + ".csv";
  AutotuneConfig config;
  config.warmup_samples = 2;
  config.steps_per_sample = 5;
  config.min_sample_seconds = 0;
  config.max_samples = 30;
  config.noise = 0.05;
  config.log_path = log;
  TunedParams initial{64 << 20, 5.0, 1 << 22};  // far from the peak
  Autotuner tuner(config, initial);
  int changes = 0;
  TunedParams best = Tune(tuner, 100000, &changes);
  ASSERT_TRUE(tuner.done());
  EXPECT_EQ(changes, config.max_samples);
  EXPECT_GT(Throughput(best), 0.9e9)
      << best.fusion_threshold << " " << best.cycle_time_ms << " "
      << best.small_allreduce_bytes;
  EXPECT_LT(Throughput(initial), 0.5e9);
  // Settled on a setting it measured, exactly.
  std::ifstream check(log);
  std::string row;
  bool measured = false;
  const std::string key = std::to_string(best.fusion_threshold) + ",";
  while (std::getline(check, row))
    if (row.find(",sample," + key) != std::string::npos) measured = true;
  EXPECT_TRUE(measured) << best.fusion_threshold;
  // Settled: no more changes.
  EXPECT_FALSE(tuner.Record(1 << 20, Clock::now()));
  std::ifstream f(log);
  std::string line;
  int warmup = 0, samples = 0, bests = 0, lines = 0;
  while (std::getline(f, line)) {
    ++lines;
    warmup += line.find(",warmup,") != std::string::npos;
    samples += line.find(",sample,") != std::string::npos;
    bests += line.find(",best,") != std::string::npos;
  }
  EXPECT_EQ(warmup, 2);
  EXPECT_EQ(samples, 30);
  EXPECT_EQ(bests, 1);
  EXPECT_EQ(lines, 1 + 2 + 30 + 1);  // with the header
  unlink(log.c_str());
}

TEST(Autotuner, KeepsExplicitParametersFixed) {
  AutotuneConfig config;
  config.warmup_samples = 0;
  config.steps_per_sample = 2;
  config.min_sample_seconds = 0.01;  // about 10 steps of the synthetic job
  config.max_samples = 8;
  config.tune_cycle_time = false;
  config.tune_small_allreduce = false;
  TunedParams initial{1 << 20, 3.5, 12345};
  Autotuner tuner(config, initial);
  int changes = 0;
  TunedParams p = Tune(tuner, 10000, &changes);
  EXPECT_TRUE(tuner.done());
  EXPECT_EQ(p.cycle_time_ms, 3.5);
  EXPECT_EQ(p.small_allreduce_bytes, 12345);
  EXPECT_GE(p.fusion_threshold, 1 << 16);
  EXPECT_LE(p.fusion_threshold, 1 << 28);

  // Nothing left to tune: done from the start, parameters untouched.
  config.tune_fusion_threshold = false;
  Autotuner idle(config, initial);
  EXPECT_TRUE(idle.done());
  EXPECT_FALSE(idle.Record(1 << 20, Clock::now()));
  EXPECT_EQ(idle.params().fusion_threshold, 1 << 20);
}

}  // namespace
}  // namespace horovod
