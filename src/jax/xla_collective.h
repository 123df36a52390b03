// HorovodXlaCollective: an XLA FFI handler (typed custom call) that runs
// one engine operation on XLA's own buffers, so that collectives inside
// jax.jit cost no host callback and no copy: allreduce reads its operand
// buffer and writes the result buffer XLA allocated (out of place);
// broadcast copies the operand into the result, then works in place.
//
// horovod.jax registers it with jax.ffi.register_ffi_target (see
// _core.xla_collective_handler) and calls it through jax.ffi.ffi_call with
// one operand and one result per tensor (a group when several) and these
// attributes: kind (int64, an OpType), prefix and name (strings: the
// operation negotiates as `<prefix>.<name>`, or, with name "", as
// `<prefix>.jit.<n>`, numbered per process set in the order the ranks run
// it), reduce_op, root, process_set (int64), prescale, postscale
// (float64).
//
// The handler submits to the engine of kernels::EngineBinding::Process(),
// waits (XLA's CPU thunks are synchronous), and then takes its thread out
// of the engine's census. Thread-safe.
#ifndef HOROVOD_JAX_XLA_COLLECTIVE_H_
#define HOROVOD_JAX_XLA_COLLECTIVE_H_

#include "jax/xla_ffi_api.h"

extern "C" XLA_FFI_Error* HorovodXlaCollective(XLA_FFI_CallFrame* frame);

#endif  // HOROVOD_JAX_XLA_COLLECTIVE_H_
