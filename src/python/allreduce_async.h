// A framework's in-place allreduce_async_ as one C function (see
// MakeAllreduceAsync): the call a training loop makes once per gradient,
// bound, described and enqueued without a Python frame.
//
// The function object owns its state (the table, the adapter's export and
// fallback, interned parameter names, the types whose tensors it describes
// in place) until Python frees it. Called holding the GIL.
#ifndef HOROVOD_PYTHON_ALLREDUCE_ASYNC_H_
#define HOROVOD_PYTHON_ALLREDUCE_ASYNC_H_

#include <nanobind/nanobind.h>

namespace horovod {

// allreduce_async_(tensor, average=None, name=None, op=None,
// prescale_factor=1.0, postscale_factor=1.0, process_set=global_set) over
// `table`'s engine. The calls a training loop makes per gradient (a named,
// contiguous tensor on the global process set, `op` an int or None,
// numeric scale factors, no `average`) are described in place through the
// tensor type's DLPack exchange table, or exported with `export_fn`, then
// enqueued and filed; every other call goes to `fallback`, the adapter's
// Python implementation, with the same arguments. `default_op` is the op
// when `op` is None.
nanobind::object MakeAllreduceAsync(nanobind::object table,
                                    nanobind::object export_fn,
                                    nanobind::object fallback,
                                    nanobind::object global_set,
                                    int default_op);

}  // namespace horovod

#endif  // HOROVOD_PYTHON_ALLREDUCE_ASYNC_H_
