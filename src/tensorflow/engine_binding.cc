#include "tensorflow/engine_binding.h"

#include <mutex>

namespace horovod {
namespace tensorflow {

bool EngineBinding::Bind(const HvdFrameworkApi* api, void* engine) {
  if (api != nullptr && api->version != HVD_FRAMEWORK_API_VERSION) return false;
  std::unique_lock<std::shared_mutex> lock(mu_);
  api_ = api;
  engine_ = api != nullptr ? engine : nullptr;
  return true;
}

EngineBinding& EngineBinding::Process() {
  static EngineBinding binding;
  return binding;
}

}  // namespace tensorflow
}  // namespace horovod

// Called by horovod.tensorflow through ctypes; returns 0 on success.
extern "C" __attribute__((visibility("default"))) int horovod_tf_bind(
    const HvdFrameworkApi* api, void* engine) {
  return horovod::tensorflow::EngineBinding::Process().Bind(api, engine) ? 0
                                                                         : 1;
}
