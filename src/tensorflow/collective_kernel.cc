// CollectiveKernel: Horovod's TensorFlow ops, written against TensorFlow's
// stable C API (tf_c_api.h) and submitting to the engine through its C
// table (framework_api.h). horovod.tensorflow loads this library with
// tf.load_op_library; the ops run eagerly and in graphs alike.
//
// HorovodCollective runs one or more engine operations ("units") in one
// kernel call: unit u covers `sizes[u]` consecutive inputs, is of kind
// `kinds[u]` (an OpType) and negotiates as `names[u]`, suffixed with
// `numbers[u]` when that is non-negative (eager, unnamed operations). All
// units start before any is waited for, so a step's gradients form one
// unit of work: one blocking kernel per gradient would deadlock ranks whose
// executors (a small inter-op pool) schedule them in different orders.
// HorovodEagerCollective runs the same, its units given not as attributes
// but as the number of a plan registered once through horovod_tf_plan:
// eagerly, TensorFlow's dispatch converts and hashes every attribute on
// every call.
// Allreduce and broadcast outputs reuse their input's buffer when TensorFlow
// allows it; else allreduce reads the input and writes a fresh output (out
// of place, no copy) and broadcast works on a copy. Large allreduce results
// go out of place to engine result buffers, which are kept for the next
// call (plan_runner.cc says why). Engine-allocated outputs (allgather,
// reducescatter, alltoall) and result buffers become tensors without a
// copy.
//
// Kernels are synchronous: TensorFlow's asynchronous C kernels cannot be
// completed from another thread. A kernel blocks its executor thread until
// its operations finish, then takes the thread out of the engine's census.
//
// Thread-safety: TensorFlow may run one kernel object on several threads at
// once; Compute keeps its state on the stack.
#include <horovod/status.h>
#include <horovod/types.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/engine_binding.h"
#include "kernels/int_attribute.h"
#include "tensorflow/plan_runner.h"

namespace horovod {
namespace tensorflow {
namespace {

// Plans that eager calls name by number, so that TensorFlow's eager
// dispatch handles one type attribute per call instead of the plan's eight
// (a large share of a small collective's time). horovod.tensorflow
// registers each distinct plan once. Plans are never removed, so a plan's
// address stays valid; the table holds at most kMaxPlans (a program that
// names its operations anew every step fills it, and its later calls carry
// their attributes instead).
//
// Thread-safe.
class PlanTable {
 public:
  static constexpr size_t kMaxPlans = 1 << 16;

  // The plan's number, or -1 when the table is full.
  int64_t Add(std::unique_ptr<Plan> plan) {
    std::lock_guard<std::mutex> lock(mu_);
    if (plans_.size() >= kMaxPlans) return -1;
    plans_.push_back(std::move(plan));
    return static_cast<int64_t>(plans_.size() - 1);
  }

  const Plan* Find(int64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (id < 0 || static_cast<uint64_t>(id) >= plans_.size()) return nullptr;
    return plans_[static_cast<size_t>(id)].get();
  }

  static PlanTable& Process() {
    static PlanTable table;
    return table;
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Plan>> plans_;
};

// The int64 tensor of input `i`, of `expected` elements, or null (the
// kernel failed, naming `what`).
TensorPtr Int64Input(TF_OpKernelContext* ctx, int i, size_t expected,
                     const char* what) {
  TensorPtr t = PlanRunner::Input(ctx, i);
  if (t && TF_TensorByteSize(t.get()) != expected * sizeof(int64_t)) {
    Fail(ctx, kTfInvalidArgument,
         std::string("HorovodCollective: ") + what + ": expected " +
             std::to_string(expected) + " int64 values");
    return nullptr;
  }
  return t;
}

// HorovodCollective and HorovodAlltoall: the plan in the op's attributes,
// read once when TensorFlow constructs the kernel.
class CollectiveKernel {
 public:
  static void* Create(TF_OpKernelConstruction* ctx) {
    auto* k = new CollectiveKernel();
    TfStatus st;
    if (!k->ReadAttrs(ctx, st.s)) {
      TF_OpKernelConstruction_Failure(ctx, st.s);
      delete k;
      return nullptr;
    }
    return k;
  }
  static void Compute(void* kernel, TF_OpKernelContext* ctx) {
    static_cast<CollectiveKernel*>(kernel)->Run(ctx);
  }
  static void Delete(void* kernel) {
    delete static_cast<CollectiveKernel*>(kernel);
  }

 private:
  bool ReadAttrs(TF_OpKernelConstruction* ctx, TF_Status* st) {
    std::vector<int64_t> kinds = IntList(ctx, "kinds", st);
    std::vector<int64_t> sizes = IntList(ctx, "sizes", st);
    std::vector<std::string> names = StringList(ctx, "names", st);
    int64_t reduce_op = 0, root = 0, process_set = 0;
    TF_OpKernelConstruction_GetAttrInt64(ctx, "reduce_op", &reduce_op, st);
    TF_OpKernelConstruction_GetAttrInt64(ctx, "root", &root, st);
    TF_OpKernelConstruction_GetAttrInt64(ctx, "process_set", &process_set, st);
    TF_OpKernelConstruction_GetAttrFloat(ctx, "prescale", &plan_.prescale, st);
    TF_OpKernelConstruction_GetAttrFloat(ctx, "postscale", &plan_.postscale,
                                         st);
    if (TF_GetCode(st) != kTfOk) return false;
    std::string range;
    if (!kernels::IntAttribute("reduce op", reduce_op, &plan_.reduce_op,
                               &range) ||
        !kernels::IntAttribute("root rank", root, &plan_.root, &range) ||
        !kernels::IntAttribute("process set", process_set, &plan_.process_set,
                               &range)) {
      range += BoundRankNote();
      TF_SetStatus(st, kTfInvalidArgument, range.c_str());
      return false;
    }
    std::string error;
    if (kinds.size() != sizes.size() || kinds.size() != names.size() ||
        !plan_.SetUnits(kinds.data(), sizes.data(), names.data(), kinds.size(),
                        &error)) {
      TF_SetStatus(st, kTfInvalidArgument,
                   error.empty() ? "HorovodCollective: kinds, sizes and names "
                                   "must be lists of one length"
                                 : error.c_str());
      return false;
    }
    return true;
  }

  // " (rank r)" for an error, or nothing before hvd.init().
  static std::string BoundRankNote() {
    kernels::EngineBinding::Lease lease(kernels::EngineBinding::Process());
    if (!lease) return "";
    return " (rank " + std::to_string(lease.api().rank(lease.engine())) + ")";
  }

  static std::vector<int64_t> IntList(TF_OpKernelConstruction* ctx,
                                      const char* name, TF_Status* st) {
    int32_t n = 0, total = 0;
    TF_OpKernelConstruction_GetAttrSize(ctx, name, &n, &total, st);
    std::vector<int64_t> out(n > 0 ? n : 0);
    if (n > 0)
      TF_OpKernelConstruction_GetAttrInt64List(ctx, name, out.data(), n, st);
    return out;
  }

  static std::vector<std::string> StringList(TF_OpKernelConstruction* ctx,
                                             const char* name, TF_Status* st) {
    int32_t n = 0, total = 0;
    TF_OpKernelConstruction_GetAttrSize(ctx, name, &n, &total, st);
    std::vector<std::string> out;
    if (n <= 0 || TF_GetCode(st) != kTfOk) return out;
    std::vector<char*> values(n);
    std::vector<size_t> lengths(n);
    std::vector<char> storage(total > 0 ? total : 1);
    TF_OpKernelConstruction_GetAttrStringList(ctx, name, values.data(),
                                              lengths.data(), n, storage.data(),
                                              storage.size(), st);
    for (int i = 0; i < n && TF_GetCode(st) == kTfOk; ++i)
      out.emplace_back(values[i], lengths[i]);
    return out;
  }

  void Run(TF_OpKernelContext* ctx) {
    const int num_inputs = TF_NumInputs(ctx);
    const bool alltoall = plan_.units[0].kind == kAlltoall;
    // Trailing inputs: alltoall's splits, then the name numbers.
    if (num_inputs != plan_.num_tensors + (alltoall ? 2 : 1)) {
      Fail(ctx, kTfInvalidArgument, "HorovodCollective: wrong input count");
      return;
    }
    TensorPtr numbers = Int64Input(ctx, num_inputs - 1, plan_.units.size(),
                                   "one name number per unit");
    if (!numbers) return;
    PlanRunner(ctx, plan_)
        .Run(static_cast<const int64_t*>(TF_TensorData(numbers.get())));
  }

  Plan plan_;
};

// HorovodEagerCollective: the plan named by the first value of its last
// input (a registered plan's number), followed by the units' name numbers.
// It has no attributes but its inputs' types.
class EagerKernel {
 public:
  static void* Create(TF_OpKernelConstruction*) { return new EagerKernel(); }
  static void Compute(void*, TF_OpKernelContext* ctx) {
    const int num_inputs = TF_NumInputs(ctx);
    TensorPtr spec = PlanRunner::Input(ctx, num_inputs - 1);
    if (!spec) return;
    const size_t values = TF_TensorByteSize(spec.get()) / sizeof(int64_t);
    const auto* v = static_cast<const int64_t*>(TF_TensorData(spec.get()));
    const Plan* plan = values > 0 ? PlanTable::Process().Find(v[0]) : nullptr;
    if (plan == nullptr) {
      Fail(ctx, kTfInvalidArgument,
           "HorovodEagerCollective: unknown plan " +
               (values > 0 ? std::to_string(v[0]) : std::string("(none)")));
      return;
    }
    if (values != plan->units.size() + 1 ||
        num_inputs != plan->num_tensors + 1 ||
        plan->units[0].kind == kAlltoall) {
      Fail(ctx, kTfInvalidArgument,
           "HorovodEagerCollective: inputs do not match the plan");
      return;
    }
    PlanRunner(ctx, *plan).Run(v + 1);
  }
  static void Delete(void* kernel) { delete static_cast<EagerKernel*>(kernel); }
};

void Register(TF_OpDefinitionBuilder* b, const char* const* attrs) {
  for (const char* const* a = attrs; *a != nullptr; ++a)
    TF_OpDefinitionBuilderAddAttr(b, *a);
  TF_OpDefinitionBuilderSetIsStateful(b, true);
}

#define HVD_TF_TYPES \
  "{uint8, int8, int16, int32, int64, half, bfloat16, float, double, bool}"

const char* const kAttrs[] = {
    "kinds: list(int)",   "sizes: list(int)",      "names: list(string)",
    "reduce_op: int = 1", "prescale: float = 1.0", "postscale: float = 1.0",
    "root: int = 0",      "process_set: int = 0",  nullptr};

// An op over a list of tensors of any supported types, one output per
// input, with an int64 input after them named `extra`.
TF_OpDefinitionBuilder* ListOp(const char* name, const char* extra) {
  TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder(name);
  TF_OpDefinitionBuilderAddInput(b, "tensors: T");
  TF_OpDefinitionBuilderAddInput(b, extra);
  TF_OpDefinitionBuilderAddOutput(b, "outputs: T");
  TF_OpDefinitionBuilderAddAttr(b, "T: list(" HVD_TF_TYPES ") >= 1");
  return b;
}

bool RegisterOps() {
  TfStatus op_status, alltoall_status, eager_status, kernel_status;
  TF_OpDefinitionBuilder* b = ListOp("HorovodCollective", "numbers: int64");
  Register(b, kAttrs);
  TF_RegisterOpDefinition(b, op_status.s);

  b = TF_NewOpDefinitionBuilder("HorovodAlltoall");
  TF_OpDefinitionBuilderAddInput(b, "tensor: T");
  TF_OpDefinitionBuilderAddInput(b, "splits: int64");
  TF_OpDefinitionBuilderAddInput(b, "numbers: int64");
  TF_OpDefinitionBuilderAddOutput(b, "output: T");
  TF_OpDefinitionBuilderAddOutput(b, "received_splits: int32");
  TF_OpDefinitionBuilderAddAttr(b, "T: " HVD_TF_TYPES);
  Register(b, kAttrs);
  TF_RegisterOpDefinition(b, alltoall_status.s);

  b = ListOp("HorovodEagerCollective", "plan: int64");
  TF_OpDefinitionBuilderSetIsStateful(b, true);
  TF_RegisterOpDefinition(b, eager_status.s);

  for (const char* op : {"HorovodCollective", "HorovodAlltoall"}) {
    if (!kernel_status.ok()) break;
    TF_RegisterKernelBuilder(
        op,
        TF_NewKernelBuilder(op, "CPU", CollectiveKernel::Create,
                            CollectiveKernel::Compute,
                            CollectiveKernel::Delete),
        kernel_status.s);
  }
  if (kernel_status.ok())
    TF_RegisterKernelBuilder(
        "HorovodEagerCollective",
        TF_NewKernelBuilder("HorovodEagerCollective", "CPU",
                            EagerKernel::Create, EagerKernel::Compute,
                            EagerKernel::Delete),
        kernel_status.s);
  for (const TfStatus* st :
       {&op_status, &alltoall_status, &eager_status, &kernel_status}) {
    if (st->ok()) continue;
    std::fprintf(stderr, "horovod: registering TensorFlow ops failed: %s\n",
                 TF_Message(st->s));
    return false;
  }
  return true;
}

// TensorFlow's op library loader collects what a library registers while
// it is being loaded.
const bool registered = RegisterOps();

}  // namespace
}  // namespace tensorflow
}  // namespace horovod

// Called by horovod.tensorflow through ctypes; returns 0 on success.
extern "C" __attribute__((visibility("default"))) int horovod_tf_bind(
    const HvdFrameworkApi* api, void* engine) {
  return horovod::kernels::EngineBinding::Process().Bind(api, engine) ? 0 : 1;
}

// Registers a plan for HorovodEagerCollective (through ctypes): `n` units of
// kinds[u] over sizes[u] inputs named names[u]. Returns the plan's number;
// -1 with a message in `error` for units that make no sense; -2 when the
// table is full.
extern "C" __attribute__((visibility("default"))) int64_t horovod_tf_plan(
    const int64_t* kinds, const int64_t* sizes, const char* const* names, int n,
    int reduce_op, double prescale, double postscale, int root, int process_set,
    char* error, size_t error_size) {
  auto plan = std::make_unique<horovod::tensorflow::Plan>();
  plan->reduce_op = reduce_op;
  plan->prescale = static_cast<float>(prescale);
  plan->postscale = static_cast<float>(postscale);
  plan->root = root;
  plan->process_set = process_set;
  std::vector<std::string> unit_names;
  for (int u = 0; u < n; ++u) unit_names.emplace_back(names[u]);
  std::string message;
  if (!plan->SetUnits(kinds, sizes, unit_names.data(),
                      n > 0 ? static_cast<size_t>(n) : 0, &message)) {
    if (error_size > 0) std::snprintf(error, error_size, "%s", message.c_str());
    return -1;
  }
  const int64_t id =
      horovod::tensorflow::PlanTable::Process().Add(std::move(plan));
  return id < 0 ? -2 : id;
}
