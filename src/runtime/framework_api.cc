// Implements the C table over horovod::Engine: plain C values in, Handles
// and Buffers kept behind the opaque HvdOp and output owners.
#include <horovod/engine.h>
#include <horovod/framework_api.h>

#include <memory>
#include <new>
#include <string>
#include <vector>

struct HvdOp {
  horovod::Status status;
  bool rejected = false;
  std::vector<horovod::Handle> handles;
};

namespace horovod {
namespace {

Status ToViews(const HvdTensor* tensors, int count, int rank,
               std::vector<TensorView>* views) {
  if (count < 1 || tensors == nullptr)
    return Status::InvalidArgument(
        "a collective needs at least one tensor (rank " + std::to_string(rank) +
        ")");
  views->reserve(count);
  for (int i = 0; i < count; ++i) {
    const HvdTensor& t = tensors[i];
    if (t.dtype < 0 || !IsValidDataType(static_cast<uint8_t>(t.dtype)) ||
        t.ndim < 0 || (t.ndim > 0 && t.shape == nullptr))
      return Status::InvalidArgument("malformed tensor " + std::to_string(i) +
                                     " (dtype " + std::to_string(t.dtype) +
                                     ", ndim " + std::to_string(t.ndim) +
                                     ") on rank " + std::to_string(rank));
    TensorView v;
    v.data = t.data;
    v.input = t.input;
    v.dtype = static_cast<DataType>(t.dtype);
    v.shape.assign(t.shape, t.shape + t.ndim);
    views->push_back(std::move(v));
  }
  return Status::OK();
}

HvdOp* Start(void* engine, const HvdOpArgs* a, const HvdTensor* tensors,
             int count) {
  auto* op = new HvdOp();
  Engine& eng = *static_cast<Engine*>(engine);
  std::vector<TensorView> views;
  Status st = ToViews(tensors, count, eng.rank(), &views);
  if (st.ok()) {
    CollectiveArgs args;
    args.name = a->name ? a->name : "";
    args.op = ReduceOpFromInt(a->reduce_op);
    args.prescale = a->prescale;
    args.postscale = a->postscale;
    args.root = a->root;
    if (a->splits != nullptr && a->num_splits > 0)
      args.splits.assign(a->splits, a->splits + a->num_splits);
    args.process_set = a->process_set;
    st =
        eng.Enqueue(static_cast<OpType>(a->op_type), views, args, &op->handles);
  }
  if (!st.ok()) {
    op->status = st;
    op->rejected = true;
  }
  return op;
}

int Wait(HvdOp* op) {
  for (const Handle& h : op->handles) {
    Status st = h.Wait();
    if (!st.ok() && op->status.ok()) op->status = st;
  }
  return static_cast<int>(op->status.code());
}

const char* Message(const HvdOp* op) { return op->status.message().c_str(); }

int Rejected(const HvdOp* op) { return op->rejected ? 1 : 0; }

// Hands `buf` out as `out`, its owner a reference of its own.
void Export(std::shared_ptr<Buffer> buf, const std::vector<int64_t>* shape,
            HvdOutput* out) {
  out->data = buf->data();
  out->bytes = buf->size();
  out->ndim = shape != nullptr ? static_cast<int>(shape->size()) : 0;
  out->shape = shape != nullptr ? shape->data() : nullptr;
  out->owner = new std::shared_ptr<Buffer>(std::move(buf));
}

int Output(HvdOp* op, int index, HvdOutput* out) {
  if (index < 0 || index >= static_cast<int>(op->handles.size())) return 1;
  const Handle& h = op->handles[index];
  std::shared_ptr<Buffer> buf = h.output();
  if (!buf) return 1;
  Export(std::move(buf), &h.output_shape(), out);
  return 0;
}

void ReleaseOutput(void* owner) {
  delete static_cast<std::shared_ptr<Buffer>*>(owner);
}

int ResultBuffer(void* engine, size_t bytes, HvdOutput* out) {
  try {
    Export(static_cast<Engine*>(engine)->ResultBuffer(bytes), nullptr, out);
    return 0;
  } catch (const std::bad_alloc&) {
    return 1;
  }
}

int ReceivedSplits(const HvdOp* op, const int64_t** splits) {
  if (op->handles.empty()) return 0;
  const std::vector<int64_t>& s = op->handles[0].received_splits();
  *splits = s.data();
  return static_cast<int>(s.size());
}

void Release(HvdOp* op) { delete op; }

void LeaveCensus(void* engine) { static_cast<Engine*>(engine)->LeaveCensus(); }

int Rank(void* engine) { return static_cast<Engine*>(engine)->rank(); }

const HvdFrameworkApi kApi = {
    HVD_FRAMEWORK_API_VERSION,
    Start,
    Wait,
    Message,
    Rejected,
    Output,
    ReleaseOutput,
    ResultBuffer,
    ReceivedSplits,
    Release,
    LeaveCensus,
    Rank,
};

}  // namespace

const HvdFrameworkApi* FrameworkApi() { return &kApi; }

}  // namespace horovod
