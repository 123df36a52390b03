// HandleTable's poll and synchronize as methods of CPython's own kind
// (method descriptors over plain C functions), not nanobind bindings:
// `synchronize` is called once per tensor, and a bound method of this kind
// reaches the table with the handle number in a fraction of a general
// binding's dispatch. Adapters export the bound methods as their
// hvd.poll and hvd.synchronize.
//
// The methods hold no state of their own; they run holding the GIL, which
// guards the table (synchronize releases it only to wait).
#ifndef HOROVOD_PYTHON_TABLE_METHODS_H_
#define HOROVOD_PYTHON_TABLE_METHODS_H_

#include <nanobind/nanobind.h>

namespace horovod {

// Adds poll(handle) and synchronize(handle) to `table_type`, the bound
// HandleTable class.
void AddTableMethods(nanobind::handle table_type);

}  // namespace horovod

#endif  // HOROVOD_PYTHON_TABLE_METHODS_H_
