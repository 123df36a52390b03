// DlpackExchange: DLPack's C exchange protocol, as a consumer reads it. A
// framework's tensor type may carry, as `__dlpack_c_exchange_api__`, a
// capsule named "dlpack_exchange_api" that holds a table of C functions;
// one of them describes a tensor object in a DLTensor the caller provides,
// with no Python call, no capsule and no allocation. That is a fraction of
// what a `to_dlpack` export costs, once per gradient on the data path.
//
// Describe looks the table up once per type (kept for the few types it saw
// last) and falls back to nothing: a type without the table, a table of an
// unknown major version, or a tensor the framework will not describe
// leaves the caller to export the tensor the usual way.
//
// Holds references to the types it remembers. Runs holding the GIL; not
// thread-safe beyond what the GIL orders.
#ifndef HOROVOD_PYTHON_DLPACK_EXCHANGE_H_
#define HOROVOD_PYTHON_DLPACK_EXCHANGE_H_

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>

namespace horovod {
namespace dlpack {

class DlpackExchange {
 public:
  // Writes the tensor `obj` holds into `*out`; false (with no Python error
  // left set) when its type offers no description or refuses this tensor.
  // The shape and strides `*out` points to are the framework's, valid
  // until control returns to Python; the data, while `obj` lives and is
  // not resized.
  bool Describe(nanobind::handle obj, nanobind::dlpack::dltensor* out);

  // The C signature of the table's describing function.
  using DescribeFn = int (*)(void* py_object, nanobind::dlpack::dltensor* out);
  // The describing function `type` offers, or null.
  static DescribeFn Lookup(nanobind::handle type);

 private:
  static constexpr size_t kTypes = 4;
  struct Known {
    nanobind::object type;  // null: unused
    DescribeFn describe = nullptr;
  };
  Known known_[kTypes];
  size_t next_ = 0;  // the entry a new type replaces
};

}  // namespace dlpack
}  // namespace horovod

#endif  // HOROVOD_PYTHON_DLPACK_EXCHANGE_H_
