#include "jax/xla_collective.h"

#include <horovod/framework_api.h>
#include <horovod/status.h>
#include <horovod/types.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/canonical_code.h"
#include "kernels/engine_binding.h"
#include "kernels/int_attribute.h"

namespace horovod {
namespace jax {
namespace {

using kernels::EngineBinding;

// The C table speaks in horovod's enum values as ints.
constexpr int64_t kAllreduce = static_cast<int64_t>(OpType::kAllreduce);
constexpr int64_t kBroadcast = static_cast<int64_t>(OpType::kBroadcast);

// The engine's DataType for an XLA element type, or -1.
int EngineDataType(XLA_FFI_DataType t) {
  DataType d;
  switch (t) {
    case XLA_FFI_DataType_U8:
      d = DataType::kUInt8;
      break;
    case XLA_FFI_DataType_S8:
      d = DataType::kInt8;
      break;
    case XLA_FFI_DataType_S16:
      d = DataType::kInt16;
      break;
    case XLA_FFI_DataType_S32:
      d = DataType::kInt32;
      break;
    case XLA_FFI_DataType_S64:
      d = DataType::kInt64;
      break;
    case XLA_FFI_DataType_F16:
      d = DataType::kFloat16;
      break;
    case XLA_FFI_DataType_BF16:
      d = DataType::kBFloat16;
      break;
    case XLA_FFI_DataType_F32:
      d = DataType::kFloat32;
      break;
    case XLA_FFI_DataType_F64:
      d = DataType::kFloat64;
      break;
    case XLA_FFI_DataType_PRED:
      d = DataType::kBool;
      break;
    default:
      return -1;
  }
  return static_cast<int>(d);
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
  size_t n = DataTypeSize(static_cast<DataType>(EngineDataType(b.dtype)));
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
    int reduce_op = 0, root = 0, ps = 0;
    std::string range;
    if (!kernels::IntAttribute("reduce op", attrs.reduce_op, &reduce_op,
                               &range) ||
        !kernels::IntAttribute("root rank", attrs.root, &root, &range) ||
        !kernels::IntAttribute("process set", attrs.process_set, &ps, &range))
      return Error(
          frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
          range + " (rank " + std::to_string(api->rank(lease.engine())) + ")");
    const std::string name =
        !attrs.name.empty()
            ? attrs.prefix + "." + attrs.name
            : attrs.prefix + ".jit." +
                  std::to_string(EngineBinding::Process().NextNumber(ps));
    HvdOpArgs args{};
    args.op_type = static_cast<int>(attrs.kind);
    args.name = name.c_str();
    args.reduce_op = reduce_op;
    args.prescale = attrs.prescale;
    args.postscale = attrs.postscale;
    args.root = root;
    args.process_set = ps;
    op = api->start(lease.engine(), &args, views.data(), static_cast<int>(n));
  }
  const int code = api->wait(op);
  XLA_FFI_Error* error =
      code == 0 ? nullptr
                : Error(frame,
                        // XLA's codes use the canonical numbering.
                        static_cast<XLA_FFI_Error_Code>(kernels::CanonicalCode(
                            code, api->rejected(op) != 0)),
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
