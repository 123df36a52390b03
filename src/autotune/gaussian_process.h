// GaussianProcess: regression with a squared-exponential kernel over points
// in the unit cube, used by the autotuner to model throughput as a function
// of the engine's parameters from a few noisy measurements.
//
// Targets are standardized internally (mean 0, variance 1), so `noise` is
// the measurement noise variance relative to the variance of the targets.
// Small: a few dozen points, solved by Cholesky. Not thread-safe; owned by
// its user.
#ifndef HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_H_
#define HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_H_

#include <vector>

namespace horovod {

class GaussianProcess {
 public:
  GaussianProcess(double length_scale, double noise)
      : length_scale_(length_scale), noise_(noise) {}

  // Replaces the training data. False if the kernel matrix is not positive
  // definite (then Predict returns the prior).
  bool Fit(const std::vector<std::vector<double>>& x,
           const std::vector<double>& y);
  // Posterior mean and variance at `x`, in the units of y.
  void Predict(const std::vector<double>& x, double* mean,
               double* variance) const;

 private:
  double Kernel(const std::vector<double>& a,
                const std::vector<double>& b) const;

  double length_scale_;
  double noise_;
  std::vector<std::vector<double>> x_;
  double y_mean_ = 0, y_scale_ = 1;
  std::vector<double> chol_;   // lower-triangular L, row-major n x n
  std::vector<double> alpha_;  // K^-1 (y standardized)
};

}  // namespace horovod

#endif  // HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_H_
