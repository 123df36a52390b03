#include "python/dlpack_exchange.h"

#include <cstdint>

namespace nb = nanobind;

namespace horovod {
namespace dlpack {
namespace {

// The exchange table's layout, as DLPack 1.x fixes it. Only the header and
// the describing function are read; the other entries are there for their
// places.
struct TableHeader {
  uint32_t major;
  uint32_t minor;
  TableHeader* older;  // the same table for an earlier version, or null
};

struct Table {
  TableHeader header;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object;
  void* managed_tensor_to_py_object;
  DlpackExchange::DescribeFn dltensor_from_py_object;  // may be null
  void* current_work_stream;
};

constexpr uint32_t kMajor = 1;

}  // namespace

DlpackExchange::DescribeFn DlpackExchange::Lookup(nb::handle type) {
  PyObject* capsule =
      PyObject_GetAttrString(type.ptr(), "__dlpack_c_exchange_api__");
  if (capsule == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  auto* table = static_cast<Table*>(
      PyCapsule_IsValid(capsule, "dlpack_exchange_api")
          ? PyCapsule_GetPointer(capsule, "dlpack_exchange_api")
          : nullptr);
  // The table lives as long as the process (DLPack's rule): the capsule
  // need not be kept.
  Py_DECREF(capsule);
  if (table == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  // A newer table links the older versions it also serves.
  for (TableHeader* h = &table->header; h != nullptr; h = h->older)
    if (h->major == kMajor)
      return reinterpret_cast<Table*>(h)->dltensor_from_py_object;
  return nullptr;
}

bool DlpackExchange::Describe(nb::handle obj, nb::dlpack::dltensor* out) {
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()));
  Known* k = nullptr;
  for (Known& known : known_)
    if (known.type.ptr() == type) {
      k = &known;
      break;
    }
  if (k == nullptr) {
    k = &known_[next_];
    next_ = (next_ + 1) % kTypes;
    k->type = nb::borrow(type);
    k->describe = Lookup(type);
  }
  if (k->describe == nullptr) return false;
  if (k->describe(obj.ptr(), out) == 0) return true;
  PyErr_Clear();  // the usual export will raise what is wrong, if anything
  return false;
}

}  // namespace dlpack
}  // namespace horovod
