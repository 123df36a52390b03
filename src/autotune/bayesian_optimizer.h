// BayesianOptimizer: proposes where to measure next in the unit cube, to
// find the maximum of a noisy function in few measurements: a Gaussian
// process models the samples so far and the next point maximizes expected
// improvement over the best predicted value (over random candidates; the
// space has a handful of dimensions). Deterministic for a given seed.
// Not thread-safe; owned by its user.
#ifndef HOROVOD_AUTOTUNE_BAYESIAN_OPTIMIZER_H_
#define HOROVOD_AUTOTUNE_BAYESIAN_OPTIMIZER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "autotune/gaussian_process.h"

namespace horovod {

class BayesianOptimizer {
 public:
  BayesianOptimizer(int dims, double noise, uint64_t seed);

  void AddSample(const std::vector<double>& x, double y);
  // The next point to measure.
  std::vector<double> Next();
  // Index of the sampled point the model rates best (robust to one lucky
  // sample); -1 before any sample.
  int Best() const;
  const std::vector<double>& x(int i) const { return x_[i]; }
  double y(int i) const { return y_[i]; }
  size_t samples() const { return y_.size(); }

  // Expected improvement of a prediction over `best` (standard formula; 0
  // when there is no uncertainty).
  static double ExpectedImprovement(double mean, double variance, double best);

 private:
  int dims_;
  GaussianProcess gp_;
  std::mt19937_64 rng_;
  std::vector<std::vector<double>> x_;
  std::vector<double> y_;
};

}  // namespace horovod

#endif  // HOROVOD_AUTOTUNE_BAYESIAN_OPTIMIZER_H_
