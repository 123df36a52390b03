#include "autotune/bayesian_optimizer.h"

#include <cmath>

namespace horovod {
namespace {

constexpr double kLengthScale = 0.25;  // in unit-cube coordinates
constexpr int kCandidates = 2000;
constexpr double kExploration = 0.01;  // EI margin, in units of the scores

}  // namespace

BayesianOptimizer::BayesianOptimizer(int dims, double noise, uint64_t seed)
    : dims_(dims), gp_(kLengthScale, noise), rng_(seed) {}

void BayesianOptimizer::AddSample(const std::vector<double>& x, double y) {
  x_.push_back(x);
  y_.push_back(y);
  gp_.Fit(x_, y_);
}

double BayesianOptimizer::ExpectedImprovement(double mean, double variance,
                                              double best) {
  const double sigma = std::sqrt(variance);
  if (sigma < 1e-12) return std::max(0.0, mean - best);
  const double z = (mean - best) / sigma;
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
  return (mean - best) * cdf + sigma * pdf;
}

std::vector<double> BayesianOptimizer::Next() {
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> pick(dims_);
  for (double& v : pick) v = u(rng_);
  if (y_.empty()) return pick;
  double best = -INFINITY, spread = 0, mean, var;
  for (const auto& x : x_) {
    gp_.Predict(x, &mean, &var);
    best = std::max(best, mean);
  }
  for (double y : y_) spread = std::max(spread, std::fabs(y));
  best += kExploration * spread;
  double top = -1;
  std::vector<double> c(dims_);
  for (int i = 0; i < kCandidates; ++i) {
    for (double& v : c) v = u(rng_);
    gp_.Predict(c, &mean, &var);
    double ei = ExpectedImprovement(mean, var, best);
    if (ei > top) {
      top = ei;
      pick = c;
    }
  }
  return pick;
}

int BayesianOptimizer::Best() const {
  int best = -1;
  double top = -INFINITY, mean, var;
  for (size_t i = 0; i < x_.size(); ++i) {
    gp_.Predict(x_[i], &mean, &var);
    if (mean > top) {
      top = mean;
      best = static_cast<int>(i);
    }
  }
  return best;
}

}  // namespace horovod
