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
// Allreduce and broadcast outputs reuse their input's buffer when TensorFlow
// allows it; else allreduce reads the input and writes a fresh output (out
// of place, no copy) and broadcast works on a copy. Engine-allocated
// outputs (allgather, reducescatter, alltoall) become tensors without a
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
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/canonical_code.h"
#include "kernels/engine_binding.h"
#include "tensorflow/tf_c_api.h"

namespace horovod {
namespace tensorflow {
namespace {

using kernels::EngineBinding;

// The C table speaks in horovod's enum values as ints.
constexpr int kAllreduce = static_cast<int>(OpType::kAllreduce);
constexpr int kBroadcast = static_cast<int>(OpType::kBroadcast);
constexpr int kAlltoall = static_cast<int>(OpType::kAlltoall);
constexpr int kReducescatter = static_cast<int>(OpType::kReducescatter);
constexpr int kSum = static_cast<int>(ReduceOp::kSum);

struct TfStatus {
  TF_Status* s = TF_NewStatus();
  ~TfStatus() { TF_DeleteStatus(s); }
  bool ok() const { return TF_GetCode(s) == kTfOk; }
};

struct TensorDeleter {
  void operator()(TF_Tensor* t) const { TF_DeleteTensor(t); }
};
using TensorPtr = std::unique_ptr<TF_Tensor, TensorDeleter>;

// TensorFlow's dtype as the engine's DataType, or -1.
int EngineDataType(int tf_dtype) {
  DataType t;
  switch (tf_dtype) {
    case kTfUInt8:
      t = DataType::kUInt8;
      break;
    case kTfInt8:
      t = DataType::kInt8;
      break;
    case kTfInt16:
      t = DataType::kInt16;
      break;
    case kTfInt32:
      t = DataType::kInt32;
      break;
    case kTfInt64:
      t = DataType::kInt64;
      break;
    case kTfHalf:
      t = DataType::kFloat16;
      break;
    case kTfBFloat16:
      t = DataType::kBFloat16;
      break;
    case kTfFloat:
      t = DataType::kFloat32;
      break;
    case kTfDouble:
      t = DataType::kFloat64;
      break;
    case kTfBool:
      t = DataType::kBool;
      break;
    default:
      return -1;
  }
  return static_cast<int>(t);
}

void Fail(TF_OpKernelContext* ctx, int code, const std::string& message) {
  TfStatus st;
  TF_SetStatus(st.s, code, message.c_str());
  TF_OpKernelContext_Failure(ctx, st.s);
}

struct OutputOwner {
  const HvdFrameworkApi* api;
  void* owner;
};

void ReleaseOutput(void*, size_t, void* arg) {
  auto* o = static_cast<OutputOwner*>(arg);
  o->api->release_output(o->owner);
  delete o;
}

struct Unit {
  int kind;
  int first;
  int count;
  std::string name;
};

// One input: its tensor, shape and the view the engine gets.
struct Operand {
  TensorPtr tensor;
  int tf_dtype = 0;
  std::vector<int64_t> shape;
  HvdTensor view{};
};

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
    int64_t v = 0;
    TF_OpKernelConstruction_GetAttrInt64(ctx, "reduce_op", &v, st);
    reduce_op_ = static_cast<int>(v);
    TF_OpKernelConstruction_GetAttrInt64(ctx, "root", &v, st);
    root_ = static_cast<int>(v);
    TF_OpKernelConstruction_GetAttrInt64(ctx, "process_set", &v, st);
    process_set_ = static_cast<int>(v);
    TF_OpKernelConstruction_GetAttrFloat(ctx, "prescale", &prescale_, st);
    TF_OpKernelConstruction_GetAttrFloat(ctx, "postscale", &postscale_, st);
    if (TF_GetCode(st) != kTfOk) return false;
    if (kinds.size() != sizes.size() || kinds.size() != names.size() ||
        kinds.empty()) {
      TF_SetStatus(st, kTfInvalidArgument,
                   "HorovodCollective: kinds, sizes and names must be "
                   "non-empty lists of one length");
      return false;
    }
    int first = 0;
    for (size_t u = 0; u < kinds.size(); ++u) {
      if (sizes[u] < 1 || (kinds[u] == kAlltoall && sizes[u] != 1)) {
        TF_SetStatus(st, kTfInvalidArgument,
                     "HorovodCollective: bad unit size");
        return false;
      }
      units_.push_back({static_cast<int>(kinds[u]), first,
                        static_cast<int>(sizes[u]), names[u]});
      first += static_cast<int>(sizes[u]);
    }
    num_tensors_ = first;
    return true;
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

  static bool InPlace(int kind) {
    return kind == kAllreduce || kind == kBroadcast;
  }

  // Reads input i; for in-place kinds, also makes output i (the input's own
  // buffer when TensorFlow can forward it, else a fresh one that allreduce
  // writes out of place and broadcast works on as a copy) and points the
  // view at the output.
  bool Prepare(TF_OpKernelContext* ctx, int i, int kind, Operand* op) {
    op->tensor = Input(ctx, i);
    if (!op->tensor) return false;
    TF_Tensor* in = op->tensor.get();
    op->tf_dtype = TF_TensorType(in);
    const int dtype = EngineDataType(op->tf_dtype);
    if (dtype < 0) {
      Fail(ctx, kTfInvalidArgument,
           "horovod: unsupported tensor dtype " +
               std::to_string(TF_TensorType(in)));
      return false;
    }
    const int nd = TF_NumDims(in);
    op->shape.resize(nd);
    for (int d = 0; d < nd; ++d) op->shape[d] = TF_Dim(in, d);
    op->view.dtype = dtype;
    op->view.ndim = nd;
    op->view.shape = op->shape.data();
    op->view.data = TF_TensorData(in);
    if (!InPlace(kind)) return true;
    TfStatus st;
    int forwarded = -1;
    TensorPtr out(TF_ForwardInputOrAllocateOutput(
        ctx, &i, 1, i, op->shape.data(), nd, &forwarded, st.s));
    if (!st.ok()) {
      TF_OpKernelContext_Failure(ctx, st.s);
      return false;
    }
    op->view.data = TF_TensorData(out.get());
    if (forwarded >= 0 || TF_TensorByteSize(in) == 0) return true;
    if (kind == kAllreduce)
      op->view.input = TF_TensorData(in);
    else
      std::memcpy(op->view.data, TF_TensorData(in), TF_TensorByteSize(in));
    return true;
  }

  void Run(TF_OpKernelContext* ctx) {
    const int num_inputs = TF_NumInputs(ctx);
    const bool alltoall = units_[0].kind == kAlltoall;
    // Trailing inputs: alltoall's splits, then the name numbers.
    const int extra = alltoall ? 2 : 1;
    if (num_inputs != num_tensors_ + extra) {
      Fail(ctx, kTfInvalidArgument, "HorovodCollective: wrong input count");
      return;
    }
    std::vector<Operand> operands(num_tensors_);
    for (const Unit& u : units_)
      for (int i = u.first; i < u.first + u.count; ++i)
        if (!Prepare(ctx, i, u.kind, &operands[i])) return;
    TensorPtr splits = Input(ctx, num_tensors_);
    TensorPtr numbers = Input(ctx, num_inputs - 1);
    if (!numbers || (alltoall && !splits)) return;
    if (TF_TensorByteSize(numbers.get()) != units_.size() * sizeof(int64_t)) {
      Fail(ctx, kTfInvalidArgument,
           "HorovodCollective: one name number per unit expected");
      return;
    }
    const auto* number =
        static_cast<const int64_t*>(TF_TensorData(numbers.get()));

    std::vector<HvdOp*> ops;
    const HvdFrameworkApi* api = nullptr;
    {
      EngineBinding::Lease lease(EngineBinding::Process());
      if (!lease) {
        Fail(ctx, kTfFailedPrecondition,
             "Horovod has not been initialized; use hvd.init().");
        return;
      }
      api = &lease.api();
      for (size_t k = 0; k < units_.size(); ++k) {
        const Unit& u = units_[k];
        const std::string name =
            number[k] >= 0 ? u.name + std::to_string(number[k]) : u.name;
        // The reduction attributes belong to the reducing units only.
        const bool reduces = u.kind == kAllreduce || u.kind == kReducescatter;
        HvdOpArgs args{};
        args.op_type = u.kind;
        args.name = name.c_str();
        args.reduce_op = reduces ? reduce_op_ : kSum;
        args.prescale = reduces ? prescale_ : 1.0;
        args.postscale = reduces ? postscale_ : 1.0;
        args.root = root_;
        args.process_set = process_set_;
        if (alltoall) {
          args.splits =
              static_cast<const int64_t*>(TF_TensorData(splits.get()));
          args.num_splits = static_cast<int>(TF_TensorByteSize(splits.get()) /
                                             sizeof(int64_t));
        }
        std::vector<HvdTensor> views;
        for (int i = u.first; i < u.first + u.count; ++i)
          views.push_back(operands[i].view);
        ops.push_back(api->start(lease.engine(), &args, views.data(), u.count));
      }
    }
    // Every operation is waited for before any input may be released.
    const HvdOp* failed = nullptr;
    int code = 0;
    for (HvdOp* op : ops) {
      const int c = api->wait(op);
      if (c != 0 && failed == nullptr) {
        failed = op;
        code = c;
      }
    }
    if (failed != nullptr) {
      // TF_Code uses the canonical numbering.
      Fail(ctx, kernels::CanonicalCode(code, api->rejected(failed) != 0),
           api->message(failed));
    } else {
      SetOutputs(ctx, *api, ops, operands);
    }
    for (HvdOp* op : ops) api->release(op);
    EngineBinding::Lease lease(EngineBinding::Process());
    if (lease) lease.api().leave_census(lease.engine());
  }

  static TensorPtr Input(TF_OpKernelContext* ctx, int i) {
    TfStatus st;
    TF_Tensor* t = nullptr;
    TF_GetInput(ctx, i, &t, st.s);
    if (!st.ok()) {
      TF_OpKernelContext_Failure(ctx, st.s);
      return nullptr;
    }
    return TensorPtr(t);
  }

  // Engine-allocated results become outputs without a copy; alltoall also
  // outputs the rows received from each member.
  void SetOutputs(TF_OpKernelContext* ctx, const HvdFrameworkApi& api,
                  const std::vector<HvdOp*>& ops,
                  const std::vector<Operand>& operands) {
    TfStatus st;
    for (size_t u = 0; u < units_.size() && st.ok(); ++u) {
      const Unit& unit = units_[u];
      if (InPlace(unit.kind)) continue;
      for (int j = 0; j < unit.count && st.ok(); ++j) {
        HvdOutput out{};
        if (api.output(ops[u], j, &out) != 0) {
          TF_SetStatus(st.s, kTfInternal, "horovod: operation has no output");
          break;
        }
        const int i = unit.first + j;
        TensorPtr t(TF_NewTensor(operands[i].tf_dtype, out.shape, out.ndim,
                                 out.data, out.bytes, ReleaseOutput,
                                 new OutputOwner{&api, out.owner}));
        TF_SetOutput(ctx, i, t.get(), st.s);
      }
      if (unit.kind == kAlltoall && st.ok()) {
        const int64_t* received = nullptr;
        const int count = api.received_splits(ops[u], &received);
        const int64_t dims[1] = {count};
        TensorPtr t(TF_AllocateOutput(ctx, num_tensors_, kTfInt32, dims, 1,
                                      count * sizeof(int32_t), st.s));
        if (st.ok()) {
          auto* dst = static_cast<int32_t*>(TF_TensorData(t.get()));
          for (int k = 0; k < count; ++k)
            dst[k] = static_cast<int32_t>(received[k]);
        }
      }
    }
    if (!st.ok()) TF_OpKernelContext_Failure(ctx, st.s);
  }

  std::vector<Unit> units_;
  int num_tensors_ = 0;
  int reduce_op_ = 0;
  int root_ = 0;
  int process_set_ = 0;
  float prescale_ = 1.0f;
  float postscale_ = 1.0f;
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

bool RegisterOps() {
  TfStatus op_status, alltoall_status, kernel_status;
  TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder("HorovodCollective");
  TF_OpDefinitionBuilderAddInput(b, "tensors: T");
  TF_OpDefinitionBuilderAddInput(b, "numbers: int64");
  TF_OpDefinitionBuilderAddOutput(b, "outputs: T");
  TF_OpDefinitionBuilderAddAttr(b, "T: list(" HVD_TF_TYPES ") >= 1");
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

  for (const char* op : {"HorovodCollective", "HorovodAlltoall"}) {
    if (!kernel_status.ok()) break;
    TF_RegisterKernelBuilder(
        op,
        TF_NewKernelBuilder(op, "CPU", CollectiveKernel::Create,
                            CollectiveKernel::Compute,
                            CollectiveKernel::Delete),
        kernel_status.s);
  }
  for (const TfStatus* st : {&op_status, &alltoall_status, &kernel_status}) {
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
