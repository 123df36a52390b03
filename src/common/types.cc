#include <horovod/status.h>
#include <horovod/types.h>

#include <sstream>

namespace horovod {

size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kBool:
      return 1;
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kBool:
      return "bool";
  }
  return "invalid";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kAverage:
      return "Average";
    case ReduceOp::kSum:
      return "Sum";
    case ReduceOp::kAdasum:
      return "Adasum";
    case ReduceOp::kMin:
      return "Min";
    case ReduceOp::kMax:
      return "Max";
    case ReduceOp::kProduct:
      return "Product";
  }
  return "invalid";
}

const char* OpTypeName(OpType op) {
  switch (op) {
    case OpType::kAllreduce:
      return "allreduce";
    case OpType::kAllgather:
      return "allgather";
    case OpType::kBroadcast:
      return "broadcast";
    case OpType::kAlltoall:
      return "alltoall";
    case OpType::kReducescatter:
      return "reducescatter";
    case OpType::kBarrier:
      return "barrier";
    case OpType::kJoin:
      return "join";
  }
  return "invalid";
}

bool IsValidDataType(uint8_t t) { return t < kNumDataTypes; }

bool IsFloatingPoint(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 ||
         t == DataType::kFloat32 || t == DataType::kFloat64;
}

int64_t TensorView::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

std::string ScaleString(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string Status::ToString() const {
  static const char* names[] = {"OK",      "InvalidArgument", "Mismatch",
                                "Aborted", "Timeout",         "Internal",
                                "Tampered"};
  int c = static_cast<int>(code_);
  std::string s = (c >= 0 && c < 7) ? names[c] : "Unknown";
  if (!message_.empty()) s += ": " + message_;
  return s;
}

}  // namespace horovod
