#include "tensorflow/plan_runner.h"

#include <cstring>

#include "kernels/canonical_code.h"
#include "kernels/engine_binding.h"

namespace horovod {
namespace tensorflow {
namespace {

using kernels::EngineBinding;

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

// Allreduce results of this size and more go to engine result buffers.
// TensorFlow's allocator, on an executor thread of its own, hands out
// freshly mapped memory for such a result in each call of a graph wherever
// its input cannot be forwarded, which the reduction then faults in page by
// page (64 MiB in 75-100 ms instead of 20 on this VM); smaller ones come
// from memory its arena keeps.
constexpr size_t kResultBufferBytes = size_t{64} << 10;

struct OutputOwner {
  const HvdFrameworkApi* api;
  void* owner;
};

void ReleaseOutput(void*, size_t, void* arg) {
  auto* o = static_cast<OutputOwner*>(arg);
  o->api->release_output(o->owner);
  delete o;
}

// Makes output `i` a tensor over engine memory that `owner` keeps alive,
// handing `owner` to TensorFlow.
void SetEngineOutput(TF_OpKernelContext* ctx, const HvdFrameworkApi& api, int i,
                     int tf_dtype, const int64_t* shape, int ndim, void* data,
                     size_t bytes, void* owner, TF_Status* st) {
  TensorPtr t(TF_NewTensor(tf_dtype, shape, ndim, data, bytes, ReleaseOutput,
                           new OutputOwner{&api, owner}));
  TF_SetOutput(ctx, i, t.get(), st);
}

}  // namespace

void Fail(TF_OpKernelContext* ctx, int code, const std::string& message) {
  TfStatus st;
  TF_SetStatus(st.s, code, message.c_str());
  TF_OpKernelContext_Failure(ctx, st.s);
}

bool Plan::SetUnits(const int64_t* kinds, const int64_t* sizes,
                    const std::string* names, size_t n, std::string* error) {
  if (n == 0) {
    *error =
        "HorovodCollective: kinds, sizes and names must be non-empty "
        "lists of one length";
    return false;
  }
  int first = 0;
  for (size_t u = 0; u < n; ++u) {
    if (sizes[u] < 1 || sizes[u] > (1 << 20) ||
        (kinds[u] == kAlltoall && sizes[u] != 1)) {
      *error = "HorovodCollective: bad unit size " + std::to_string(sizes[u]);
      return false;
    }
    units.push_back({static_cast<int>(kinds[u]), first,
                     static_cast<int>(sizes[u]), names[u]});
    first += static_cast<int>(sizes[u]);
  }
  num_tensors = first;
  return true;
}

void PlanRunner::Run(const int64_t* numbers) {
  const bool alltoall = plan_.units[0].kind == kAlltoall;
  std::vector<Operand> operands(plan_.num_tensors);
  for (const Unit& u : plan_.units)
    for (int i = u.first; i < u.first + u.count; ++i)
      if (!Prepare(i, u.kind, &operands[i])) return;
  TensorPtr splits;
  if (alltoall) {
    splits = Input(ctx_, plan_.num_tensors);
    if (!splits) return;
  }

  std::vector<HvdOp*> ops;
  const HvdFrameworkApi* api = nullptr;
  {
    EngineBinding::Lease lease(EngineBinding::Process());
    if (!lease) {
      Fail(ctx_, kTfFailedPrecondition,
           "Horovod has not been initialized; use hvd.init().");
      return;
    }
    api = &lease.api();
    if (!TakeResultBuffers(*api, lease.engine(), &operands)) return;
    std::vector<HvdTensor> views;
    for (size_t k = 0; k < plan_.units.size(); ++k) {
      const Unit& u = plan_.units[k];
      const std::string name =
          numbers[k] >= 0 ? u.name + std::to_string(numbers[k]) : u.name;
      const bool reduces = u.kind == kAllreduce || u.kind == kReducescatter;
      HvdOpArgs args{};
      args.op_type = u.kind;
      args.name = name.c_str();
      args.reduce_op = reduces ? plan_.reduce_op : kSum;
      args.prescale = reduces ? plan_.prescale : 1.0;
      args.postscale = reduces ? plan_.postscale : 1.0;
      args.root = plan_.root;
      args.process_set = plan_.process_set;
      if (alltoall) {
        args.splits = static_cast<const int64_t*>(TF_TensorData(splits.get()));
        args.num_splits =
            static_cast<int>(TF_TensorByteSize(splits.get()) / sizeof(int64_t));
      }
      views.clear();
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
    Fail(ctx_, kernels::CanonicalCode(code, api->rejected(failed) != 0),
         api->message(failed));
  } else {
    SetOutputs(*api, ops, &operands);
  }
  for (HvdOp* op : ops) api->release(op);
  EngineBinding::Lease lease(EngineBinding::Process());
  if (lease) lease.api().leave_census(lease.engine());
}

TensorPtr PlanRunner::Input(TF_OpKernelContext* ctx, int i) {
  TfStatus st;
  TF_Tensor* t = nullptr;
  TF_GetInput(ctx, i, &t, st.s);
  if (!st.ok()) {
    TF_OpKernelContext_Failure(ctx, st.s);
    return nullptr;
  }
  return TensorPtr(t);
}

bool PlanRunner::InPlace(int kind) {
  return kind == kAllreduce || kind == kBroadcast;
}

bool PlanRunner::Prepare(int i, int kind, Operand* op) {
  op->tensor = Input(ctx_, i);
  if (!op->tensor) return false;
  TF_Tensor* in = op->tensor.get();
  op->tf_dtype = TF_TensorType(in);
  const int dtype = EngineDataType(op->tf_dtype);
  if (dtype < 0) {
    Fail(ctx_, kTfInvalidArgument,
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
  if (kind == kAllreduce && TF_TensorByteSize(in) >= kResultBufferBytes) {
    op->into_result = true;
    op->view.input = TF_TensorData(in);
    return true;
  }
  TfStatus st;
  int forwarded = -1;
  TensorPtr out(TF_ForwardInputOrAllocateOutput(
      ctx_, &i, 1, i, op->shape.data(), nd, &forwarded, st.s));
  if (!st.ok()) {
    TF_OpKernelContext_Failure(ctx_, st.s);
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

bool PlanRunner::TakeResultBuffers(const HvdFrameworkApi& api, void* engine,
                                   std::vector<Operand>* operands) {
  for (Operand& op : *operands) {
    if (!op.into_result) continue;
    const size_t bytes = TF_TensorByteSize(op.tensor.get());
    HvdOutput out{};
    if (api.result_buffer(engine, bytes, &out) != 0) {
      Fail(ctx_, kTfResourceExhausted,
           "horovod: no memory for an allreduce result of " +
               std::to_string(bytes) + " bytes on rank " +
               std::to_string(api.rank(engine)));
      return false;
    }
    op.result.api = &api;
    op.result.owner = out.owner;
    op.view.data = out.data;
  }
  return true;
}

void PlanRunner::SetOutputs(const HvdFrameworkApi& api,
                            const std::vector<HvdOp*>& ops,
                            std::vector<Operand>* operands) {
  TfStatus st;
  for (size_t u = 0; u < plan_.units.size() && st.ok(); ++u) {
    const Unit& unit = plan_.units[u];
    if (InPlace(unit.kind)) {
      for (int i = unit.first; i < unit.first + unit.count && st.ok(); ++i) {
        Operand& op = (*operands)[i];
        if (op.result.owner == nullptr) continue;
        void* owner = op.result.owner;
        op.result.owner = nullptr;  // TensorFlow's now
        SetEngineOutput(ctx_, api, i, op.tf_dtype, op.shape.data(),
                        static_cast<int>(op.shape.size()), op.view.data,
                        TF_TensorByteSize(op.tensor.get()), owner, st.s);
      }
      continue;
    }
    for (int j = 0; j < unit.count && st.ok(); ++j) {
      HvdOutput out{};
      if (api.output(ops[u], j, &out) != 0) {
        TF_SetStatus(st.s, kTfInternal, "horovod: operation has no output");
        break;
      }
      const int i = unit.first + j;
      SetEngineOutput(ctx_, api, i, (*operands)[i].tf_dtype, out.shape,
                      out.ndim, out.data, out.bytes, out.owner, st.s);
    }
    if (unit.kind == kAlltoall && st.ok()) {
      const int64_t* received = nullptr;
      const int count = api.received_splits(ops[u], &received);
      const int64_t dims[1] = {count};
      TensorPtr t(TF_AllocateOutput(ctx_, plan_.num_tensors, kTfInt32, dims, 1,
                                    count * sizeof(int32_t), st.s));
      if (st.ok()) {
        auto* dst = static_cast<int32_t*>(TF_TensorData(t.get()));
        for (int k = 0; k < count; ++k)
          dst[k] = static_cast<int32_t>(received[k]);
      }
    }
  }
  if (!st.ok()) TF_OpKernelContext_Failure(ctx_, st.s);
}

}  // namespace tensorflow
}  // namespace horovod
