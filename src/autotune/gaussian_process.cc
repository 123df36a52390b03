#include "autotune/gaussian_process.h"

#include <algorithm>
#include <cmath>

namespace horovod {

double GaussianProcess::Kernel(const std::vector<double>& a,
                               const std::vector<double>& b) const {
  double d2 = 0;
  for (size_t i = 0; i < a.size(); ++i) d2 += (a[i] - b[i]) * (a[i] - b[i]);
  return std::exp(-d2 / (2 * length_scale_ * length_scale_));
}

bool GaussianProcess::Fit(const std::vector<std::vector<double>>& x,
                          const std::vector<double>& y) {
  const size_t n = x.size();
  x_ = x;
  y_mean_ = 0;
  for (double v : y) y_mean_ += v;
  y_mean_ = n ? y_mean_ / n : 0;
  double var = 0;
  for (double v : y) var += (v - y_mean_) * (v - y_mean_);
  y_scale_ = n > 1 && var > 0 ? std::sqrt(var / n) : 1;
  // K + noise I = L L^T.
  chol_.assign(n * n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j <= i; ++j) {
      double s = Kernel(x[i], x[j]) + (i == j ? noise_ : 0);
      for (size_t k = 0; k < j; ++k) s -= chol_[i * n + k] * chol_[j * n + k];
      if (i == j) {
        if (s <= 0) {
          x_.clear();
          alpha_.clear();
          return false;
        }
        chol_[i * n + i] = std::sqrt(s);
      } else {
        chol_[i * n + j] = s / chol_[j * n + j];
      }
    }
  }
  // alpha = L^-T L^-1 y.
  alpha_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    double s = (y[i] - y_mean_) / y_scale_;
    for (size_t k = 0; k < i; ++k) s -= chol_[i * n + k] * alpha_[k];
    alpha_[i] = s / chol_[i * n + i];
  }
  for (size_t i = n; i-- > 0;) {
    double s = alpha_[i];
    for (size_t k = i + 1; k < n; ++k) s -= chol_[k * n + i] * alpha_[k];
    alpha_[i] = s / chol_[i * n + i];
  }
  return true;
}

void GaussianProcess::Predict(const std::vector<double>& x, double* mean,
                              double* variance) const {
  const size_t n = x_.size();
  std::vector<double> k(n), v(n);
  double m = 0;
  for (size_t i = 0; i < n; ++i) {
    k[i] = Kernel(x, x_[i]);
    m += k[i] * alpha_[i];
  }
  // var = k(x,x) - |L^-1 k|^2.
  double var = 1;
  for (size_t i = 0; i < n; ++i) {
    double s = k[i];
    for (size_t j = 0; j < i; ++j) s -= chol_[i * n + j] * v[j];
    v[i] = s / chol_[i * n + i];
    var -= v[i] * v[i];
  }
  *mean = y_mean_ + m * y_scale_;
  *variance = std::max(var, 1e-12) * y_scale_ * y_scale_;
}

}  // namespace horovod
