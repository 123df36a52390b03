// Value types shared by the public API and the engine: data types, reduction
// and collective kinds, and TensorView (a non-owning view of caller memory).
// All types here are plain values; thread-compatible.
#ifndef HOROVOD_TYPES_H_
#define HOROVOD_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace horovod {

// Wire values are stable: they travel between ranks.
enum class DataType : uint8_t {
  kUInt8 = 0,
  kInt8 = 1,
  kInt16 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kFloat16 = 5,
  kBFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBool = 9,
};
constexpr int kNumDataTypes = 10;

// Numbering follows upstream Horovod's op constants (Average=0 ... Product=5).
enum class ReduceOp : uint8_t {
  kAverage = 0,
  kSum = 1,
  kAdasum = 2,
  kMin = 3,
  kMax = 4,
  kProduct = 5,
};

// A reduce op as frameworks pass it, an int: one outside uint8's range
// becomes 255, which no op is, rather than wrapping onto a real one, so
// that the engine refuses it at enqueue.
inline ReduceOp ReduceOpFromInt(int v) {
  return static_cast<ReduceOp>(v >= 0 && v <= 255 ? v : 255);
}

enum class OpType : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
};

size_t DataTypeSize(DataType t);
const char* DataTypeName(DataType t);
const char* ReduceOpName(ReduceOp op);
const char* OpTypeName(OpType op);
bool IsValidDataType(uint8_t t);
bool IsFloatingPoint(DataType t);

// Non-owning view of a dense, C-contiguous tensor in host memory.
struct TensorView {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  int device = -1;  // -1: CPU
  // Allreduce only: the operand, read from here while the result goes to
  // `data` (out of place: a framework whose tensors are immutable skips
  // copying the input first). Same shape and dtype; null: in place.
  const void* input = nullptr;

  int64_t NumElements() const;
  size_t NumBytes() const { return NumElements() * DataTypeSize(dtype); }
};

std::string ShapeString(const std::vector<int64_t>& shape);
// A scale factor as errors print it: "0.5", "nan", "inf" (std::to_string
// would print 0.500000).
std::string ScaleString(double v);

}  // namespace horovod

#endif  // HOROVOD_TYPES_H_
