#include "jax/xla_collective.h"

#include <horovod/framework_api.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/engine_binding.h"

namespace horovod {
namespace jax {
namespace {

using kernels::EngineBinding;

// horovod::OpType, ReduceOp and StatusCode values (framework_api.h).
enum : int64_t { kAllreduce = 0, kBroadcast = 2 };
enum : int {
  kInvalidArgument = 1,
  kMismatch = 2,
  kAborted = 3,
  kTimeout = 4,
};

// The engine's DataType for an XLA element type, or -1.
int EngineDataType(XLA_FFI_DataType t) {
  switch (t) {
    case XLA_FFI_DataType_U8:
      return 0;
    case XLA_FFI_DataType_S8:
      return 1;
    case XLA_FFI_DataType_S16:
      return 2;
    case XLA_FFI_DataType_S32:
      return 3;
    case XLA_FFI_DataType_S64:
      return 4;
    case XLA_FFI_DataType_F16:
      return 5;
    case XLA_FFI_DataType_BF16:
      return 6;
    case XLA_FFI_DataType_F32:
      return 7;
    case XLA_FFI_DataType_F64:
      return 8;
    case XLA_FFI_DataType_PRED:
      return 9;
  }
  return -1;
}

XLA_FFI_Error* Error(const XLA_FFI_CallFrame* frame, XLA_FFI_Error_Code code,
                     const std::string& message) {
  XLA_FFI_Error_Create_Args args;
  args.struct_size = offsetof(XLA_FFI_Error_Create_Args, errc) +
                     sizeof(XLA_FFI_Error_Create_Args::errc);
  args.extension_start = nullptr;
  args.message = message.c_str();
  args.errc = code;
  return frame->api->XLA_FFI_Error_Create(&args);
}

XLA_FFI_Error_Code XlaCodeOf(int code, bool rejected) {
  if (code == kInvalidArgument && rejected)
    return XLA_FFI_Error_Code_INVALID_ARGUMENT;
  if (code == kMismatch) return XLA_FFI_Error_Code_FAILED_PRECONDITION;
  if (code == kTimeout) return XLA_FFI_Error_Code_DEADLINE_EXCEEDED;
  if (code == kAborted) return XLA_FFI_Error_Code_ABORTED;
  return XLA_FFI_Error_Code_INTERNAL;
}

struct Attrs {
  int64_t kind = -1;
  std::string name;
  std::string prefix;
  int64_t reduce_op = 1;
  int64_t root = 0;
  int64_t process_set = 0;
  double prescale = 1.0;
  double postscale = 1.0;
};

// Reads the attributes by name; false names the first one that is not
// what it should be.
bool ReadAttrs(const XLA_FFI_Attrs& in, Attrs* out, std::string* bad) {
  for (int64_t i = 0; i < in.size; ++i) {
    const std::string key(in.names[i]->ptr, in.names[i]->len);
    if (in.types[i] == XLA_FFI_AttrType_STRING) {
      const auto* s = static_cast<const XLA_FFI_ByteSpan*>(in.attrs[i]);
      if (key == "name")
        out->name.assign(s->ptr, s->len);
      else if (key == "prefix")
        out->prefix.assign(s->ptr, s->len);
      continue;
    }
    if (in.types[i] != XLA_FFI_AttrType_SCALAR) {
      *bad = key;
      return false;
    }
    const auto* s = static_cast<const XLA_FFI_Scalar*>(in.attrs[i]);
    if (s->dtype == XLA_FFI_DataType_F64) {
      const double v = *static_cast<const double*>(s->value);
      if (key == "prescale")
        out->prescale = v;
      else if (key == "postscale")
        out->postscale = v;
    } else if (s->dtype == XLA_FFI_DataType_S64) {
      const int64_t v = *static_cast<const int64_t*>(s->value);
      if (key == "kind")
        out->kind = v;
      else if (key == "reduce_op")
        out->reduce_op = v;
      else if (key == "root")
        out->root = v;
      else if (key == "process_set")
        out->process_set = v;
    } else {
      *bad = key;
      return false;
    }
  }
  if (out->kind != kAllreduce && out->kind != kBroadcast) {
    *bad = "kind";
    return false;
  }
  return true;
}

size_t Bytes(const XLA_FFI_Buffer& b) {
  static const size_t kSize[] = {1, 1, 2, 4, 8, 2, 2, 4, 8, 1};
  size_t n = kSize[EngineDataType(b.dtype)];
  for (int64_t d = 0; d < b.rank; ++d) n *= static_cast<size_t>(b.dims[d]);
  return n;
}

XLA_FFI_Error* Execute(XLA_FFI_CallFrame* frame) {
  Attrs attrs;
  std::string bad;
  if (!ReadAttrs(frame->attrs, &attrs, &bad))
    return Error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                 "horovod XLA collective: bad attribute '" + bad + "'");
  const int64_t n = frame->args.size;
  if (n < 1 || frame->rets.size != n)
    return Error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                 "horovod XLA collective: one result per operand expected");
  std::vector<HvdTensor> views(n);
  for (int64_t i = 0; i < n; ++i) {
    if (frame->args.types[i] != XLA_FFI_ArgType_BUFFER ||
        frame->rets.types[i] != XLA_FFI_RetType_BUFFER)
      return Error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                   "horovod XLA collective: buffers expected");
    const auto* in = static_cast<const XLA_FFI_Buffer*>(frame->args.args[i]);
    const auto* out = static_cast<const XLA_FFI_Buffer*>(frame->rets.rets[i]);
    const int dtype = EngineDataType(in->dtype);
    if (dtype < 0 || out->dtype != in->dtype)
      return Error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                   "horovod XLA collective: unsupported element type " +
                       std::to_string(static_cast<int>(in->dtype)));
    HvdTensor& v = views[i];
    v.data = out->data;
    v.dtype = dtype;
    v.ndim = static_cast<int>(out->rank);
    v.shape = out->dims;
    v.input = nullptr;
    if (in->data == out->data) continue;  // XLA aliased them: in place
    if (attrs.kind == kAllreduce)
      v.input = in->data;
    else
      std::memcpy(out->data, in->data, Bytes(*in));
  }

  HvdOp* op = nullptr;
  const HvdFrameworkApi* api = nullptr;
  {
    EngineBinding::Lease lease(EngineBinding::Process());
    if (!lease)
      return Error(frame, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                   "Horovod has not been initialized; use hvd.init().");
    api = &lease.api();
    const int ps = static_cast<int>(attrs.process_set);
    const std::string name =
        !attrs.name.empty()
            ? attrs.prefix + "." + attrs.name
            : attrs.prefix + ".jit." +
                  std::to_string(EngineBinding::Process().NextNumber(ps));
    HvdOpArgs args{};
    args.op_type = static_cast<int>(attrs.kind);
    args.name = name.c_str();
    args.reduce_op = static_cast<int>(attrs.reduce_op);
    args.prescale = attrs.prescale;
    args.postscale = attrs.postscale;
    args.root = static_cast<int>(attrs.root);
    args.process_set = ps;
    op = api->start(lease.engine(), &args, views.data(), static_cast<int>(n));
  }
  const int code = api->wait(op);
  XLA_FFI_Error* error =
      code == 0 ? nullptr
                : Error(frame, XlaCodeOf(code, api->rejected(op) != 0),
                        api->message(op));
  api->release(op);
  EngineBinding::Lease lease(EngineBinding::Process());
  if (lease) lease.api().leave_census(lease.engine());
  return error;
}

}  // namespace
}  // namespace jax
}  // namespace horovod

extern "C" XLA_FFI_Error* HorovodXlaCollective(XLA_FFI_CallFrame* frame) {
  // Registration asks for the API version this handler was built against
  // (the layouts in xla_ffi_api.h) through a metadata extension.
  const XLA_FFI_Extension_Base* ext = frame->extension_start;
  if (ext != nullptr && ext->type == XLA_FFI_Extension_Metadata) {
    auto* meta =
        reinterpret_cast<const XLA_FFI_Metadata_Extension*>(ext)->metadata;
    meta->api_version.major_version = 0;
    meta->api_version.minor_version = 1;
    meta->traits = 0;
    return nullptr;
  }
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  return horovod::jax::Execute(frame);
}
