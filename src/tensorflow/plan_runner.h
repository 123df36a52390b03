// PlanRunner: what one call of a Horovod TensorFlow op does, given its Plan
// (the engine operations, "units", over the call's inputs): reads the
// inputs, makes the in-place outputs, starts every unit on the engine
// through its C table (framework_api.h), waits for all of them and sets the
// outputs. collective_kernel.cc holds the kernels that build plans and
// register the ops.
//
// Thread-safety: a PlanRunner lives on one kernel call's stack; Plans are
// read-only once built and may be shared between calls.
#ifndef HOROVOD_TENSORFLOW_PLAN_RUNNER_H_
#define HOROVOD_TENSORFLOW_PLAN_RUNNER_H_

#include <horovod/framework_api.h>
#include <horovod/types.h>

#include <memory>
#include <string>
#include <vector>

#include "tensorflow/tf_c_api.h"

namespace horovod {
namespace tensorflow {

// The C table speaks in horovod's enum values as ints.
inline constexpr int kAllreduce = static_cast<int>(OpType::kAllreduce);
inline constexpr int kBroadcast = static_cast<int>(OpType::kBroadcast);
inline constexpr int kAlltoall = static_cast<int>(OpType::kAlltoall);
inline constexpr int kReducescatter = static_cast<int>(OpType::kReducescatter);
inline constexpr int kSum = static_cast<int>(ReduceOp::kSum);

struct TfStatus {
  TF_Status* s = TF_NewStatus();
  ~TfStatus() { TF_DeleteStatus(s); }
  bool ok() const { return TF_GetCode(s) == kTfOk; }
};

struct TensorDeleter {
  void operator()(TF_Tensor* t) const { TF_DeleteTensor(t); }
};
using TensorPtr = std::unique_ptr<TF_Tensor, TensorDeleter>;

// Fails the kernel call with TF_Code `code`.
void Fail(TF_OpKernelContext* ctx, int code, const std::string& message);

struct Unit {
  int kind;
  int first;
  int count;
  std::string name;
};

// What one call of an op runs: its units, over consecutive inputs, and the
// arguments they share (the reduction's belong to the reducing units only).
struct Plan {
  std::vector<Unit> units;
  int num_tensors = 0;
  int reduce_op = kSum;
  int root = 0;
  int process_set = 0;
  float prescale = 1.0f;
  float postscale = 1.0f;

  // Lays out units of `kinds[u]` over `sizes[u]` inputs named `names[u]`;
  // false (and `error`) unless the lists make sense.
  bool SetUnits(const int64_t* kinds, const int64_t* sizes,
                const std::string* names, size_t n, std::string* error);
};

// Runs a plan over a kernel call's inputs: the plan's tensors, then (for
// alltoall) the splits, then an int64 tensor that ends with one name
// number per unit.
class PlanRunner {
 public:
  PlanRunner(TF_OpKernelContext* ctx, const Plan& plan)
      : ctx_(ctx), plan_(plan) {}

  // `numbers`: the units' name numbers, read from the last input by the
  // caller.
  void Run(const int64_t* numbers);

  // Input `i`, or null (the kernel failed).
  static TensorPtr Input(TF_OpKernelContext* ctx, int i);

 private:
  // The owner of a result buffer (HvdFrameworkApi::result_buffer), given
  // back unless handed over to TensorFlow.
  struct ResultOwner {
    const HvdFrameworkApi* api = nullptr;
    void* owner = nullptr;
    ResultOwner() = default;
    ResultOwner(const ResultOwner&) = delete;
    ResultOwner& operator=(const ResultOwner&) = delete;
    ~ResultOwner() {
      if (owner != nullptr) api->release_output(owner);
    }
  };

  // One input: its tensor, shape and the view the engine gets.
  struct Operand {
    TensorPtr tensor;
    int tf_dtype = 0;
    std::vector<int64_t> shape;
    HvdTensor view{};
    // An allreduce whose result goes to an engine result buffer (the view's
    // data, set once the engine is at hand).
    bool into_result = false;
    ResultOwner result;
  };

  static bool InPlace(int kind);

  // Reads input i; for in-place kinds, also makes output i and points the
  // view at it: an allreduce of kResultBufferBytes or more is written out
  // of place into an engine result buffer; else output i is the input's
  // own buffer when TensorFlow can forward it, or a fresh one that
  // allreduce writes out of place and broadcast works on as a copy.
  bool Prepare(int i, int kind, Operand* op);

  // Points the views of allreduces into result buffers at buffers of
  // `engine`; false (and the kernel failed) when there is no memory.
  bool TakeResultBuffers(const HvdFrameworkApi& api, void* engine,
                         std::vector<Operand>* operands);

  // Engine-allocated results and result buffers become outputs without a
  // copy; alltoall also outputs the rows received from each member.
  void SetOutputs(const HvdFrameworkApi& api, const std::vector<HvdOp*>& ops,
                  std::vector<Operand>* operands);

  TF_OpKernelContext* ctx_;
  const Plan& plan_;
};

}  // namespace tensorflow
}  // namespace horovod

#endif  // HOROVOD_TENSORFLOW_PLAN_RUNNER_H_
