#include "kernels/engine_binding.h"

namespace horovod {
namespace kernels {

bool EngineBinding::Bind(const HvdFrameworkApi* api, void* engine) {
  if (api != nullptr && api->version != HVD_FRAMEWORK_API_VERSION) return false;
  std::unique_lock<std::shared_mutex> lock(mu_);
  api_ = api;
  engine_ = api != nullptr ? engine : nullptr;
  std::lock_guard<std::mutex> numbers_lock(numbers_mu_);
  numbers_.clear();
  return true;
}

int64_t EngineBinding::NextNumber(int process_set) {
  std::lock_guard<std::mutex> lock(numbers_mu_);
  return numbers_[process_set]++;
}

EngineBinding& EngineBinding::Process() {
  static EngineBinding binding;
  return binding;
}

}  // namespace kernels
}  // namespace horovod
