#include "collectives/adasum.h"

#include <cstring>

#include "collectives/reduce.h"

namespace horovod {
namespace {

// Element access in double, whatever the storage.
struct F32 {
  using T = float;
  static double Load(T v) { return v; }
  static T Store(double v) { return static_cast<T>(v); }
};
struct F64 {
  using T = double;
  static double Load(T v) { return v; }
  static T Store(double v) { return v; }
};
struct F16 {
  using T = uint16_t;
  static double Load(T v) { return HalfToFloat(v); }
  static T Store(double v) { return FloatToHalf(static_cast<float>(v)); }
};
struct BF16 {
  using T = uint16_t;
  static double Load(T v) { return BFloat16ToFloat(v); }
  static T Store(double v) { return FloatToBFloat16(static_cast<float>(v)); }
};

constexpr double kTinyNormSq = 1e-8;

double Coefficient(double dot, double norm_sq) {
  return norm_sq < kTinyNormSq ? 1.0 : 1.0 - dot / (2.0 * norm_sq);
}

template <typename E>
void Combine(const void* a_in, const void* b_in, void* dst_out, int64_t count) {
  using T = typename E::T;
  const T* a = static_cast<const T*>(a_in);
  const T* b = static_cast<const T*>(b_in);
  T* dst = static_cast<T*>(dst_out);
  double dot = 0, a_sq = 0, b_sq = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double x = E::Load(a[i]), y = E::Load(b[i]);
    dot += x * y;
    a_sq += x * x;
    b_sq += y * y;
  }
  const double ca = Coefficient(dot, a_sq), cb = Coefficient(dot, b_sq);
  // Element i is read before it is written, so dst may alias a or b.
  for (int64_t i = 0; i < count; ++i)
    dst[i] = E::Store(ca * E::Load(a[i]) + cb * E::Load(b[i]));
}

}  // namespace

bool AdasumSupports(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

void AdasumCombine(const void* a, const void* b, void* dst, int64_t count,
                   DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return Combine<F16>(a, b, dst, count);
    case DataType::kBFloat16:
      return Combine<BF16>(a, b, dst, count);
    case DataType::kFloat32:
      return Combine<F32>(a, b, dst, count);
    case DataType::kFloat64:
      return Combine<F64>(a, b, dst, count);
    default:
      return;  // refused when enqueued
  }
}

Status AdasumAllreduce(Communicator& comm, void* buf,
                       const std::vector<int64_t>& counts, DataType dtype) {
  const int n = comm.size(), r = comm.rank();
  if (n & (n - 1))
    return Status::InvalidArgument("Adasum needs a power-of-two member count");
  const size_t esize = DataTypeSize(dtype);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const size_t bytes = static_cast<size_t>(total) * esize;
  char* mine = static_cast<char*>(buf);
  char* theirs = comm.scratch(bytes);
  for (int distance = 1; distance < n; distance <<= 1) {
    const int peer = r ^ distance;
    HVD_RETURN_IF_ERROR(comm.SendRecv(peer, mine, bytes, peer, theirs, bytes));
    // The lower half's vector is `a` on both sides of the exchange.
    const bool lower = (r & distance) == 0;
    const char* a = lower ? mine : theirs;
    const char* b = lower ? theirs : mine;
    size_t offset = 0;
    for (int64_t c : counts) {
      AdasumCombine(a + offset, b + offset, mine + offset, c, dtype);
      offset += static_cast<size_t>(c) * esize;
    }
  }
  return Status::OK();
}

}  // namespace horovod
