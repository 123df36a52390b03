// EngineBinding: the engine that a kernel library's kernels submit to.
// Frameworks call kernels themselves, with nothing but their attributes
// (TensorFlow constructs op kernels, XLA calls FFI handlers), so a library
// keeps one binding for the process: it is set after hvd.init() starts an
// engine and cleared before the engine shuts down. A kernel holds a Lease while
// it calls into the engine; clearing waits for the leases out, so the engine is
// never used after it is gone. Leases are taken only around calls that return
// promptly (starting an operation, leaving the census), never across a wait,
// which may last until shutdown itself fails the operation.
//
// Thread-safe.
#ifndef HOROVOD_KERNELS_ENGINE_BINDING_H_
#define HOROVOD_KERNELS_ENGINE_BINDING_H_

#include <horovod/framework_api.h>

#include <map>
#include <mutex>
#include <shared_mutex>

namespace horovod {
namespace kernels {

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

  // Numbers a kernel's unnamed operations per process set, in the order
  // they run, from 0 for each engine bound: ranks that run the same
  // compiled program run its collectives in the same order, so they agree.
  int64_t NextNumber(int process_set);

  static EngineBinding& Process();

 private:
  std::shared_mutex mu_;
  const HvdFrameworkApi* api_ = nullptr;
  void* engine_ = nullptr;
  std::mutex numbers_mu_;
  std::map<int, int64_t> numbers_;
};

}  // namespace kernels
}  // namespace horovod

#endif  // HOROVOD_KERNELS_ENGINE_BINDING_H_
