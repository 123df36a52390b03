#include "python/dlpack_view.h"

#include <cstring>
#include <string>

namespace nb = nanobind;

namespace horovod {
namespace dlpack {

bool ToDataType(nb::dlpack::dtype t, DataType* out) {
  using C = nb::dlpack::dtype_code;
  const auto code = static_cast<C>(t.code);
  if (t.lanes != 1) return false;
  if (code == C::Int) {
    switch (t.bits) {
      case 8:
        *out = DataType::kInt8;
        return true;
      case 16:
        *out = DataType::kInt16;
        return true;
      case 32:
        *out = DataType::kInt32;
        return true;
      case 64:
        *out = DataType::kInt64;
        return true;
    }
  } else if (code == C::UInt && t.bits == 8) {
    *out = DataType::kUInt8;
    return true;
  } else if (code == C::Float) {
    switch (t.bits) {
      case 16:
        *out = DataType::kFloat16;
        return true;
      case 32:
        *out = DataType::kFloat32;
        return true;
      case 64:
        *out = DataType::kFloat64;
        return true;
    }
  } else if (code == C::Bfloat && t.bits == 16) {
    *out = DataType::kBFloat16;
    return true;
  } else if (code == C::Bool && t.bits == 8) {
    *out = DataType::kBool;
    return true;
  }
  return false;
}

namespace {

std::string TypeName(nb::dlpack::dtype t) {
  // The names the frameworks print; the exotic codes (float8, float4...)
  // by number, as DLPack numbers them.
  static const char* const kNames[] = {"int",    "uint",    "float", nullptr,
                                       "bfloat", "complex", "bool"};
  std::string name =
      t.code < sizeof(kNames) / sizeof(kNames[0]) && kNames[t.code] != nullptr
          ? std::string(kNames[t.code]) + std::to_string(t.bits)
          : "DLPack type code " + std::to_string(t.code) + " of " +
                std::to_string(t.bits) + " bits";
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

}  // namespace

nb::dlpack::dtype ToDlpack(DataType t) {
  using C = nb::dlpack::dtype_code;
  nb::dlpack::dtype d;
  d.lanes = 1;
  d.bits = static_cast<uint8_t>(DataTypeSize(t) * 8);
  switch (t) {
    case DataType::kUInt8:
      d.code = static_cast<uint8_t>(C::UInt);
      break;
    case DataType::kFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      d.code = static_cast<uint8_t>(C::Float);
      break;
    case DataType::kBFloat16:
      d.code = static_cast<uint8_t>(C::Bfloat);
      break;
    case DataType::kBool:
      d.code = static_cast<uint8_t>(C::Bool);
      break;
    default:
      d.code = static_cast<uint8_t>(C::Int);
      break;
  }
  return d;
}

void ToView(const nb::dlpack::dltensor& t, int rank, TensorView* out) {
  TensorView& v = *out;
  v.device = -1;
  if (!WellFormed(t))
    throw nb::value_error(
        ("malformed DLPack tensor (rank " + std::to_string(rank) + "): ndim " +
         std::to_string(t.ndim) + (t.shape == nullptr ? ", no shape" : ""))
            .c_str());
  if (!ToDataType(t.dtype, &v.dtype))
    throw nb::value_error(
        ("unsupported tensor dtype " + TypeName(t.dtype) + " (rank " +
         std::to_string(rank) +
         "): horovod supports uint8, int8, int16, int32, int64, float16, "
         "bfloat16, float32, float64 and bool")
            .c_str());
  if (t.device.device_type != nb::device::cpu::value)
    v.device = t.device.device_id;
  v.data = static_cast<char*>(t.data) + t.byte_offset;
  if (!IsCompact(t))
    throw nb::value_error(
        ("tensor must be contiguous (rank " + std::to_string(rank) + ")")
            .c_str());
  // Element by element into the shape the last call left (a steady
  // caller's has the same rank): a tensor has a few dimensions, and
  // clearing and refilling the vector went through library calls.
  const size_t ndim = static_cast<size_t>(t.ndim);
  if (v.shape.size() != ndim) v.shape.resize(ndim);
  for (size_t i = 0; i < ndim; ++i) v.shape[i] = t.shape[i];
}

namespace {

// Where a tensor lies, as errors name it.
std::string Place(const TensorView& t) {
  return t.device < 0 ? "CPU" : "device " + std::to_string(t.device);
}

}  // namespace

void CheckSource(const TensorView& source, const TensorView& out, int rank) {
  if (source.dtype == out.dtype && source.shape == out.shape &&
      source.device == out.device)
    return;
  throw nb::value_error(
      ("an out-of-place allreduce's input must match its output (rank " +
       std::to_string(rank) + "): input " + DataTypeName(source.dtype) + " " +
       ShapeString(source.shape) + " on " + Place(source) + ", output " +
       DataTypeName(out.dtype) + " " + ShapeString(out.shape) + " on " +
       Place(out))
          .c_str());
}

nb::dlpack::dltensor TensorOf(const nb::ndarray<>& a) {
  nb::dlpack::dltensor t;
  t.data = a.data();
  t.device.device_type = a.device_type();
  t.device.device_id = a.device_id();
  t.ndim = static_cast<int32_t>(a.ndim());
  t.dtype = a.dtype();
  t.shape = const_cast<int64_t*>(a.shape_ptr());
  t.strides = const_cast<int64_t*>(a.stride_ptr());
  return t;
}

TensorView ToView(const nb::ndarray<>& a, int rank) {
  TensorView v;
  ToView(TensorOf(a), rank, &v);
  return v;
}

const nb::dlpack::dltensor* CapsuleTensor(nb::handle h) {
  if (!PyCapsule_CheckExact(h.ptr())) return nullptr;
  const char* name = PyCapsule_GetName(h.ptr());
  if (name == nullptr || std::strcmp(name, "dltensor") != 0) {
    PyErr_Clear();
    return nullptr;
  }
  // A DLManagedTensor starts with its DLTensor.
  return static_cast<const nb::dlpack::dltensor*>(
      PyCapsule_GetPointer(h.ptr(), name));
}

}  // namespace dlpack
}  // namespace horovod
