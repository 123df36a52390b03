#include "collectives/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

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

// On x86-64, a function built for AVX-512, AVX2 and the baseline, the
// loader picking one through an ifunc. Not under ThreadSanitizer, whose
// runtime is not up yet when the loader runs the ifunc's resolver.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HVD_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define HVD_TSAN 1
#endif
#if defined(__x86_64__) && !defined(HVD_TSAN)
#define VECTOR_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VECTOR_CLONES
#endif

// ReduceOfScaled's piece: well inside a 32 KiB L1 with both operands.
constexpr size_t kPublishPieceBytes = 8 << 10;

// The identity, or a scaling by a factor as ScaleBuffer computes it, applied
// to each result as it is computed.
struct NoScale {
  template <typename T>
  T operator()(T v) const {
    return v;
  }
};
template <typename T>
struct FloatScale {
  T factor;
  T operator()(T v) const { return v * factor; }
};
template <typename T>
struct IntScale {  // in double, truncated
  double factor;
  T operator()(T v) const {
    return static_cast<T>(static_cast<double>(v) * factor);
  }
};
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
struct HalfScale {
  float factor;
  uint16_t operator()(uint16_t v) const { return FromF(ToF(v) * factor); }
};

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

template <typename T, typename Post>
void ReduceTyped(void* dst, const void* a, const void* b, int64_t n,
                 ReduceOp op, Post post) {
  switch (op) {
    case ReduceOp::kMin:
      Apply<T>(dst, a, b, n, [post](T x, T y) { return post(y < x ? y : x); });
      break;
    case ReduceOp::kMax:
      Apply<T>(dst, a, b, n, [post](T x, T y) { return post(x < y ? y : x); });
      break;
    case ReduceOp::kProduct:
      Apply<T>(dst, a, b, n,
               [post](T x, T y) { return post(static_cast<T>(x * y)); });
      break;
    default:
      Apply<T>(dst, a, b, n,
               [post](T x, T y) { return post(static_cast<T>(x + y)); });
      break;
  }
}

// Wrapping integer arithmetic without signed-overflow UB.
template <typename T, typename U, typename Post>
void ReduceInt(void* dst, const void* a, const void* b, int64_t n, ReduceOp op,
               Post post) {
  if (op == ReduceOp::kMin || op == ReduceOp::kMax) {
    ReduceTyped<T>(dst, a, b, n, op, post);
    return;
  }
  const bool product = op == ReduceOp::kProduct;
  Apply<T>(dst, a, b, n, [product, post](T x, T y) {
    const U u = static_cast<U>(x), v = static_cast<U>(y);
    return post(static_cast<T>(product ? static_cast<U>(u * v)
                                       : static_cast<U>(u + v)));
  });
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float), typename Post>
void Reduce16(void* dst, const void* a, const void* b, int64_t n, ReduceOp op,
              Post post) {
  switch (op) {
    // Min/Max pick one input exactly (as the float path does).
    case ReduceOp::kMin:
      Apply<uint16_t>(dst, a, b, n, [post](uint16_t x, uint16_t y) {
        return post(ToF(y) < ToF(x) ? y : x);
      });
      break;
    case ReduceOp::kMax:
      Apply<uint16_t>(dst, a, b, n, [post](uint16_t x, uint16_t y) {
        return post(ToF(x) < ToF(y) ? y : x);
      });
      break;
    case ReduceOp::kProduct:
      Apply<uint16_t>(dst, a, b, n, [post](uint16_t x, uint16_t y) {
        return post(FromF(ToF(x) * ToF(y)));
      });
      break;
    default:
      Apply<uint16_t>(dst, a, b, n, [post](uint16_t x, uint16_t y) {
        return post(FromF(ToF(x) + ToF(y)));
      });
      break;
  }
}

// kernel(post) with the identity when `factor` is 1, else with `scale`.
template <typename Scale, typename Kernel>
void WithPost(double factor, Scale scale, Kernel kernel) {
  if (factor == 1.0)
    kernel(NoScale{});
  else
    kernel(scale);
}

template <typename T, typename Scale>
void ScaleWith(void* buf, int64_t n, Scale scale) {
  T* p = static_cast<T*>(buf);
  for (int64_t i = 0; i < n; ++i) p[i] = scale(p[i]);
}

// ReduceOfScaled without the copy. Built once per vector width and picked
// at load time by what the CPU has (VECTOR_CLONES).
VECTOR_CLONES void ReduceScaled(void* dst, const void* a, const void* b,
                                int64_t count, DataType dtype, ReduceOp op,
                                double factor) {
  auto ints = [&](auto zero, auto wide) {
    using T = decltype(zero);
    using U = decltype(wide);
    WithPost(factor, IntScale<T>{factor},
             [&](auto post) { ReduceInt<T, U>(dst, a, b, count, op, post); });
  };
  switch (dtype) {
    case DataType::kUInt8:
      ints(uint8_t{}, uint8_t{});
      break;
    case DataType::kInt8:
      ints(int8_t{}, uint8_t{});
      break;
    case DataType::kInt16:
      ints(int16_t{}, uint16_t{});
      break;
    case DataType::kInt32:
      ints(int32_t{}, uint32_t{});
      break;
    case DataType::kInt64:
      ints(int64_t{}, uint64_t{});
      break;
    case DataType::kFloat32:
      WithPost(
          factor, FloatScale<float>{static_cast<float>(factor)},
          [&](auto post) { ReduceTyped<float>(dst, a, b, count, op, post); });
      break;
    case DataType::kFloat64:
      WithPost(factor, FloatScale<double>{factor}, [&](auto post) {
        ReduceTyped<double>(dst, a, b, count, op, post);
      });
      break;
    case DataType::kFloat16:
      WithPost(factor,
               HalfScale<HalfToFloat, FloatToHalf>{static_cast<float>(factor)},
               [&](auto post) {
                 Reduce16<HalfToFloat, FloatToHalf>(dst, a, b, count, op, post);
               });
      break;
    case DataType::kBFloat16:
      WithPost(factor,
               HalfScale<BFloat16ToFloat, FloatToBFloat16>{
                   static_cast<float>(factor)},
               [&](auto post) {
                 Reduce16<BFloat16ToFloat, FloatToBFloat16>(dst, a, b, count,
                                                            op, post);
               });
      break;
    case DataType::kBool: {  // never scaled (as ScaleBuffer)
      const bool conj = op == ReduceOp::kMin || op == ReduceOp::kProduct;
      Apply<uint8_t>(dst, a, b, count, [conj](uint8_t x, uint8_t y) {
        return static_cast<uint8_t>(conj ? (x && y) : (x || y));
      });
      break;
    }
  }
}

}  // namespace

void ReduceOfScaled(void* dst, void* copy, const void* a, const void* b,
                    int64_t count, DataType dtype, ReduceOp op, double factor) {
  if (copy == nullptr) {
    ReduceScaled(dst, a, b, count, dtype, op, factor);
    return;
  }
  // In pieces that stay in the first-level cache between the kernel and
  // the copy: one pass over memory, and the copy runs at memcpy's speed
  // (a loop storing each element twice ran slower than the two passes).
  const size_t esize = DataTypeSize(dtype);
  const int64_t piece = static_cast<int64_t>(kPublishPieceBytes / esize);
  for (int64_t i = 0; i < count; i += piece) {
    const int64_t k = std::min(piece, count - i);
    const size_t at = static_cast<size_t>(i) * esize;
    char* d = static_cast<char*>(dst) + at;
    ReduceScaled(d, static_cast<const char*>(a) + at,
                 static_cast<const char*>(b) + at, k, dtype, op, factor);
    std::memcpy(static_cast<char*>(copy) + at, d,
                static_cast<size_t>(k) * esize);
  }
}

#if defined(__x86_64__)
// Aligns the destination with an ordinary copy, then 16-byte streaming
// stores (SSE2, every x86-64 CPU has them); the unaligned tail is copied.
void StreamCopy(void* dst, const void* src, size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const size_t head =
      std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const size_t body = bytes / 64 * 64;
  for (size_t i = 0; i < body; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + body, s + body, bytes - body);
  // Streaming stores are weakly ordered: whoever learns the copy is done
  // (a handle, a barrier) must find it all.
  _mm_sfence();
}
#else
void StreamCopy(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}
#endif

void ReduceInto(void* dst, const void* src, int64_t count, DataType dtype,
                ReduceOp op) {
  ReduceOf(dst, dst, src, count, dtype, op);
}

void ReduceOf(void* dst, const void* a, const void* b, int64_t count,
              DataType dtype, ReduceOp op) {
  ReduceOfScaled(dst, nullptr, a, b, count, dtype, op, 1.0);
}

void ScaleBuffer(void* buf, int64_t count, DataType dtype, double factor) {
  if (factor == 1.0) return;
  const float f = static_cast<float>(factor);
  switch (dtype) {
    case DataType::kUInt8:
      ScaleWith<uint8_t>(buf, count, IntScale<uint8_t>{factor});
      break;
    case DataType::kInt8:
      ScaleWith<int8_t>(buf, count, IntScale<int8_t>{factor});
      break;
    case DataType::kInt16:
      ScaleWith<int16_t>(buf, count, IntScale<int16_t>{factor});
      break;
    case DataType::kInt32:
      ScaleWith<int32_t>(buf, count, IntScale<int32_t>{factor});
      break;
    case DataType::kInt64:
      ScaleWith<int64_t>(buf, count, IntScale<int64_t>{factor});
      break;
    case DataType::kFloat32:
      ScaleWith<float>(buf, count, FloatScale<float>{f});
      break;
    case DataType::kFloat64:
      ScaleWith<double>(buf, count, FloatScale<double>{factor});
      break;
    case DataType::kFloat16:
      ScaleWith<uint16_t>(buf, count, HalfScale<HalfToFloat, FloatToHalf>{f});
      break;
    case DataType::kBFloat16:
      ScaleWith<uint16_t>(buf, count,
                          HalfScale<BFloat16ToFloat, FloatToBFloat16>{f});
      break;
    case DataType::kBool:
      break;
  }
}

}  // namespace horovod
