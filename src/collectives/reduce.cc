#include "collectives/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace horovod {

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u)  // inf or nan (nan stays quiet)
    return sign | 0x7c00 | (x > 0x7f800000u ? 0x200 : 0);
  if (x >= 0x477ff000u) return sign | 0x7c00;  // rounds past 65504
  if (x < 0x38800000u) {                       // below the smallest normal
    float a;
    std::memcpy(&a, &x, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  x += 0xfffu + ((x >> 13) & 1u);
  return sign | static_cast<uint16_t>((x - 0x38000000u) >> 13);
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float BFloat16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

namespace {

// d[i] = f(x[i], y[i]). `d` may be `x` (each element is read before it is
// written) but overlaps neither otherwise; the two loops let the compiler
// vectorize each case without overlap checks that would fail for d == x.
template <typename T, typename F>
void Apply(void* dst, const void* a, const void* b, int64_t n, F f) {
  const T* y = static_cast<const T*>(b);
  if (dst == a) {
    T* d = static_cast<T*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = f(d[i], y[i]);
    return;
  }
  T* __restrict d = static_cast<T*>(dst);
  const T* __restrict x = static_cast<const T*>(a);
  const T* __restrict yy = y;
  for (int64_t i = 0; i < n; ++i) d[i] = f(x[i], yy[i]);
}

template <typename T>
void ReduceTyped(void* dst, const void* a, const void* b, int64_t n,
                 ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      Apply<T>(dst, a, b, n, [](T x, T y) { return y < x ? y : x; });
      break;
    case ReduceOp::kMax:
      Apply<T>(dst, a, b, n, [](T x, T y) { return x < y ? y : x; });
      break;
    case ReduceOp::kProduct:
      Apply<T>(dst, a, b, n, [](T x, T y) { return static_cast<T>(x * y); });
      break;
    default:
      Apply<T>(dst, a, b, n, [](T x, T y) { return static_cast<T>(x + y); });
      break;
  }
}

// Wrapping integer arithmetic without signed-overflow UB.
template <typename T, typename U>
void ReduceInt(void* dst, const void* a, const void* b, int64_t n,
               ReduceOp op) {
  if (op == ReduceOp::kMin || op == ReduceOp::kMax) {
    ReduceTyped<T>(dst, a, b, n, op);
    return;
  }
  const bool product = op == ReduceOp::kProduct;
  Apply<T>(dst, a, b, n, [product](T x, T y) {
    const U u = static_cast<U>(x), v = static_cast<U>(y);
    return static_cast<T>(product ? static_cast<U>(u * v)
                                  : static_cast<U>(u + v));
  });
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Reduce16(void* dst, const void* a, const void* b, int64_t n, ReduceOp op) {
  switch (op) {
    // Min/Max pick one input exactly (as the float path does).
    case ReduceOp::kMin:
      Apply<uint16_t>(dst, a, b, n, [](uint16_t x, uint16_t y) {
        return ToF(y) < ToF(x) ? y : x;
      });
      break;
    case ReduceOp::kMax:
      Apply<uint16_t>(dst, a, b, n, [](uint16_t x, uint16_t y) {
        return ToF(x) < ToF(y) ? y : x;
      });
      break;
    case ReduceOp::kProduct:
      Apply<uint16_t>(dst, a, b, n, [](uint16_t x, uint16_t y) {
        return FromF(ToF(x) * ToF(y));
      });
      break;
    default:
      Apply<uint16_t>(dst, a, b, n, [](uint16_t x, uint16_t y) {
        return FromF(ToF(x) + ToF(y));
      });
      break;
  }
}

template <typename T>
void ScaleTyped(void* buf, int64_t n, double factor) {
  T* p = static_cast<T*>(buf);
  for (int64_t i = 0; i < n; ++i)
    p[i] = static_cast<T>(static_cast<double>(p[i]) * factor);
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Scale16(void* buf, int64_t n, double factor) {
  uint16_t* p = static_cast<uint16_t*>(buf);
  float f = static_cast<float>(factor);
  for (int64_t i = 0; i < n; ++i) p[i] = FromF(ToF(p[i]) * f);
}

}  // namespace

void ReduceInto(void* dst, const void* src, int64_t count, DataType dtype,
                ReduceOp op) {
  ReduceOf(dst, dst, src, count, dtype, op);
}

void ReduceOf(void* dst, const void* a, const void* b, int64_t count,
              DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::kUInt8:
      ReduceInt<uint8_t, uint8_t>(dst, a, b, count, op);
      break;
    case DataType::kInt8:
      ReduceInt<int8_t, uint8_t>(dst, a, b, count, op);
      break;
    case DataType::kInt16:
      ReduceInt<int16_t, uint16_t>(dst, a, b, count, op);
      break;
    case DataType::kInt32:
      ReduceInt<int32_t, uint32_t>(dst, a, b, count, op);
      break;
    case DataType::kInt64:
      ReduceInt<int64_t, uint64_t>(dst, a, b, count, op);
      break;
    case DataType::kFloat32:
      ReduceTyped<float>(dst, a, b, count, op);
      break;
    case DataType::kFloat64:
      ReduceTyped<double>(dst, a, b, count, op);
      break;
    case DataType::kFloat16:
      Reduce16<HalfToFloat, FloatToHalf>(dst, a, b, count, op);
      break;
    case DataType::kBFloat16:
      Reduce16<BFloat16ToFloat, FloatToBFloat16>(dst, a, b, count, op);
      break;
    case DataType::kBool: {
      const bool conj = op == ReduceOp::kMin || op == ReduceOp::kProduct;
      Apply<uint8_t>(dst, a, b, count, [conj](uint8_t x, uint8_t y) {
        return static_cast<uint8_t>(conj ? (x && y) : (x || y));
      });
      break;
    }
  }
}

void ScaleBuffer(void* buf, int64_t count, DataType dtype, double factor) {
  if (factor == 1.0) return;
  switch (dtype) {
    case DataType::kUInt8:
      ScaleTyped<uint8_t>(buf, count, factor);
      break;
    case DataType::kInt8:
      ScaleTyped<int8_t>(buf, count, factor);
      break;
    case DataType::kInt16:
      ScaleTyped<int16_t>(buf, count, factor);
      break;
    case DataType::kInt32:
      ScaleTyped<int32_t>(buf, count, factor);
      break;
    case DataType::kInt64:
      ScaleTyped<int64_t>(buf, count, factor);
      break;
    case DataType::kFloat32: {
      float* p = static_cast<float*>(buf);
      float f = static_cast<float>(factor);
      for (int64_t i = 0; i < count; ++i) p[i] *= f;
      break;
    }
    case DataType::kFloat64:
      ScaleTyped<double>(buf, count, factor);
      break;
    case DataType::kFloat16:
      Scale16<HalfToFloat, FloatToHalf>(buf, count, factor);
      break;
    case DataType::kBFloat16:
      Scale16<BFloat16ToFloat, FloatToBFloat16>(buf, count, factor);
      break;
    case DataType::kBool:
      break;
  }
}

}  // namespace horovod
