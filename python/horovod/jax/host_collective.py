"""The host path of horovod.jax's collectives: NumPy arrays through the
engine, eagerly or, under jax.jit, as one ordered io_callback (JAX keeps
those in program order and never drops one), which carries its own vmap
rule. Results cross back into JAX without a copy where that pays.

Thread-safety: as horovod.common.ops.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap
from jax.experimental import io_callback

from horovod.common import ops as _ops
from horovod.common.exceptions import HorovodInvalidArgumentError
from horovod.common.topology import rank

_collectives = _ops.process_collectives()
_OP = _ops.OpType


def host_arrays(xs, prefix):
    """xs as NumPy arrays of dtypes the engine carries; anything else is
    refused by name (the binding would answer with its signature)."""
    out = [np.asarray(x) for x in xs]
    for x, a in zip(xs, out):
        if a.dtype.kind == "O":
            raise TypeError("%s takes arrays, got %s (rank %d)"
                            % (prefix, type(x).__name__, rank()))
        # bfloat16 is NumPy's void kind, as ml_dtypes defines it.
        if a.dtype.kind in "USVcmM" and a.dtype.name != "bfloat16":
            raise _ops.unsupported_dtype(a.dtype.name, rank())
    return out


def readable(x):
    """x as C-contiguous, writable NumPy memory the engine reads: the
    binding takes writable arrays only, and JAX hands out read-only views of
    its buffers, which are copied."""
    a = np.asarray(x)
    # Not np.ascontiguousarray, which turns a scalar into a 1-element array:
    # a scalar is contiguous as it is, and the engine must see its shape.
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a if a.flags.writeable else np.array(a)


# Below this size, copying into JAX costs less than adopting through DLPack.
_ADOPT_BYTES = 256 << 10


def aligned_copy(a):
    """A writable copy of the NumPy array `a`; when large, in 64-byte-aligned
    memory, which jax.dlpack.from_dlpack then adopts without a copy."""
    a = np.asarray(a)
    if a.nbytes < _ADOPT_BYTES:  # copied into JAX afterwards anyway
        return np.array(a, copy=True, order="C")
    raw = np.empty(a.nbytes + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    np.copyto(out, a)
    return out


def to_jax(a):
    """A NumPy array (ours, or a view of an engine output) as a JAX array:
    large ones adopted without a copy (NumPy cannot export bfloat16: those
    are copied)."""
    if a.nbytes < _ADOPT_BYTES or a.dtype.name == "bfloat16":
        return jnp.asarray(a)
    return jax.dlpack.from_dlpack(a)


def numpy_collective(op, arrays, prefix, name, process_set,
                     convert=lambda a: a, **kw):
    """One engine operation over NumPy arrays, each result passed through
    `convert`: in place on one copy for allreduce and broadcast (aligned, so
    JAX can adopt it), engine-allocated (no copy) otherwise."""
    try:
        if op in (_OP.allreduce, _OP.broadcast):
            outs = [aligned_copy(a) for a in arrays]
            _collectives.synchronize(_collectives.enqueue(
                op, outs, prefix, name, lambda _: None,
                process_set=process_set, **kw))
            return [convert(o) for o in outs]
        ins = [readable(a) for a in arrays]
        return _collectives.synchronize(_collectives.enqueue(
            op, ins, prefix, name,
            lambda chs: [convert(_ops.output_numpy(h)) for h in chs],
            process_set=process_set, **kw))
    finally:
        _collectives.leave_census()


def ordered_callback(op, prefix, name, process_set, out_specs, kw):
    """A function of traced arrays that runs the collective as one ordered
    io_callback, out_specs(xs) giving its outputs' ShapeDtypeStructs. JAX
    cannot vmap such callbacks, so the function has its own rule: allgather, alltoall and reducescatter
    work along dimension 0 and element by element in the others, so a
    batch moved to dimension 1 goes through as one collective (every rank
    must batch the same size, which the engine checks) and comes back
    batched there."""
    @custom_vmap
    def run(*xs):
        specs = out_specs(xs)

        def host(*arrays):
            outs = numpy_collective(op, list(arrays), prefix, name,
                                    process_set, **kw)
            for o, s in zip(outs, specs):
                if o.shape != s.shape:
                    raise HorovodInvalidArgumentError(
                        "%s under jax.jit produced shape %s where %s was "
                        "traced (rank %d): inside jit every rank must "
                        "contribute the same shape"
                        % (prefix, o.shape, s.shape, rank()))
            return [np.asarray(o, dtype=s.dtype) for o in outs]
        return list(io_callback(host, specs, *xs, ordered=True))

    @run.def_vmap
    def batched(axis_size, in_batched, *xs):
        outs = run(*(jnp.moveaxis(x, 0, 1) if b else x
                     for x, b in zip(xs, in_batched)))
        return ([jnp.moveaxis(o, 1, 0) if b else o
                 for o, b in zip(outs, in_batched)], list(in_batched))
    return run
