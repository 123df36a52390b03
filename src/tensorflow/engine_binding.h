// EngineBinding: the engine this library's kernels submit to. TensorFlow
// constructs kernels itself, with nothing but their attributes, so the
// library keeps one binding for the process: horovod.tensorflow sets it
// (horovod_tf_bind) after hvd.init() and clears it before the engine shuts
// down. A kernel holds a Lease while it calls into the engine; clearing
// waits for the leases out, so the engine is never used after it is gone.
// Leases are taken only around calls that return promptly (starting an
// operation, leaving the census), never across a wait, which may last until
// shutdown itself fails the operation.
//
// Thread-safe.
#ifndef HOROVOD_TENSORFLOW_ENGINE_BINDING_H_
#define HOROVOD_TENSORFLOW_ENGINE_BINDING_H_

#include <horovod/framework_api.h>

#include <shared_mutex>

namespace horovod {
namespace tensorflow {

class EngineBinding {
 public:
  class Lease {
   public:
    explicit Lease(EngineBinding& b)
        : lock_(b.mu_), api_(b.api_), engine_(b.engine_) {}
    explicit operator bool() const { return api_ != nullptr; }
    const HvdFrameworkApi& api() const { return *api_; }
    void* engine() const { return engine_; }

   private:
    std::shared_lock<std::shared_mutex> lock_;
    const HvdFrameworkApi* api_;
    void* engine_;
  };

  // api == nullptr unbinds. Returns false for a table of another version.
  bool Bind(const HvdFrameworkApi* api, void* engine);

  static EngineBinding& Process();

 private:
  std::shared_mutex mu_;
  const HvdFrameworkApi* api_ = nullptr;
  void* engine_ = nullptr;
};

}  // namespace tensorflow
}  // namespace horovod

#endif  // HOROVOD_TENSORFLOW_ENGINE_BINDING_H_
