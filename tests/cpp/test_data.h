// Test inputs shared by the collective suites: small integers in every
// dtype, so that sums, products and extremes are exact and results can be
// compared bitwise against a sequential reference.
#ifndef HOROVOD_TESTS_CPP_TEST_DATA_H_
#define HOROVOD_TESTS_CPP_TEST_DATA_H_

#include <horovod/types.h>

#include <cstdint>
#include <vector>

#include "collectives/reduce.h"

namespace horovod {

inline constexpr DataType kAllTypes[] = {
    DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
    DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
    DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64,
    DataType::kBool};
inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMin,
                                    ReduceOp::kMax, ReduceOp::kProduct};

// `count` elements for `rank`: (rank + 1) * (1..5), or with `tiny` only 1s
// and 2s (so products stay exact); bools true at every third element.
inline std::vector<char> Fill(DataType t, int64_t count, int rank, bool tiny) {
  std::vector<char> out(count * DataTypeSize(t));
  for (int64_t i = 0; i < count; ++i) {
    double v = tiny ? 1 + (i + rank) % 2 : (rank + 1) * (i % 5 + 1);
    char* p = out.data() + i * DataTypeSize(t);
    switch (t) {
      case DataType::kUInt8:
        *reinterpret_cast<uint8_t*>(p) = uint8_t(v);
        break;
      case DataType::kInt8:
        *reinterpret_cast<int8_t*>(p) = int8_t(v);
        break;
      case DataType::kInt16:
        *reinterpret_cast<int16_t*>(p) = int16_t(v);
        break;
      case DataType::kInt32:
        *reinterpret_cast<int32_t*>(p) = int32_t(v);
        break;
      case DataType::kInt64:
        *reinterpret_cast<int64_t*>(p) = int64_t(v);
        break;
      case DataType::kFloat16:
        *reinterpret_cast<uint16_t*>(p) = FloatToHalf(float(v));
        break;
      case DataType::kBFloat16:
        *reinterpret_cast<uint16_t*>(p) = FloatToBFloat16(float(v));
        break;
      case DataType::kFloat32:
        *reinterpret_cast<float*>(p) = float(v);
        break;
      case DataType::kFloat64:
        *reinterpret_cast<double*>(p) = v;
        break;
      case DataType::kBool:
        *reinterpret_cast<uint8_t*>(p) = (i + rank) % 3 == 0;
        break;
    }
  }
  return out;
}

}  // namespace horovod

#endif  // HOROVOD_TESTS_CPP_TEST_DATA_H_
