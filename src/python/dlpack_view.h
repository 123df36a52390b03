// DLPack tensors as the engine's TensorViews, and engine dtypes as DLPack's:
// the conversions horovod._core makes for every tensor that crosses into or
// out of the engine. Stateless functions; thread-safe where their arguments
// are not shared. The throwing ones raise nanobind's ValueError, naming the
// rank, so they run holding the GIL.
#ifndef HOROVOD_PYTHON_DLPACK_VIEW_H_
#define HOROVOD_PYTHON_DLPACK_VIEW_H_

#include <horovod/types.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

namespace horovod {
namespace dlpack {

// DLPack's dtype as the engine's; false for one the engine lacks.
bool ToDataType(nanobind::dlpack::dtype t, DataType* out);
nanobind::dlpack::dtype ToDlpack(DataType t);

// A rank and, when it has dimensions, a shape. Inline, as IsCompact: both
// run on every per-gradient call, where a call costs more than the check.
inline bool WellFormed(const nanobind::dlpack::dltensor& t) {
  return t.ndim >= 0 && (t.ndim == 0 || t.shape != nullptr);
}

// True when the well-formed `t` is compact and row-major, as the engine
// reads it (no strides means that, by DLPack's definition).
inline bool IsCompact(const nanobind::dlpack::dltensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expect = 1;
  for (int32_t i = t.ndim; i-- > 0;) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

// Writes the DLPack tensor `t` into `*out`, whose shape keeps its capacity
// (callers reuse one view call after call). Raises ValueError for a
// malformed, strided or unsupported tensor, leaving `*out` partly
// written.
void ToView(const nanobind::dlpack::dltensor& t, int rank, TensorView* out);
TensorView ToView(const nanobind::ndarray<>& a, int rank);

// Raises ValueError unless `source` can be read as `out`'s input in an
// out-of-place allreduce: the same dtype, shape and device.
void CheckSource(const TensorView& source, const TensorView& out, int rank);

// The DLPack tensor behind an imported ndarray.
nanobind::dlpack::dltensor TensorOf(const nanobind::ndarray<>& a);

// The tensor of an unconsumed DLPack capsule (what the frameworks' exports
// return), read where it lies, or null for any other object. nanobind's
// ndarray import would wrap it in a counted handle, an allocation and a
// release on every per-gradient call; read in place, the capsule stays the
// exporter's, and its destructor frees the tensor. The caller keeps the
// capsule alive while it reads.
const nanobind::dlpack::dltensor* CapsuleTensor(nanobind::handle h);

}  // namespace dlpack
}  // namespace horovod

#endif  // HOROVOD_PYTHON_DLPACK_VIEW_H_
