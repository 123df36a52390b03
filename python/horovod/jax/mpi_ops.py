"""Collective operations on JAX arrays.

Concrete arrays cross into the engine through DLPack/NumPy without framework
code, except allreduces and broadcasts of JAX arrays (see _eager_xla). Inside
jax.jit, allreduce and broadcast are XLA custom calls (Horovod's XLA FFI
handler in horovod._core, registered on first use) that work on XLA's own
buffers: no host callback and no copy. Their primitive is never dead-code
eliminated by JAX and lowers to a side-effecting custom call that XLA keeps
even when its result is unused; it carries no JAX effect, which would take
jitted calls off JAX's fast dispatch path (a tenfold cost for small
arrays). Every rank runs the same compiled program, so the same collectives
in the same order; an unnamed one is numbered when it runs
(`<prefix>.jit.<n>` per process set). The other collectives under jit are
ordered io_callbacks, which JAX also runs in program order and never drops,
with a vmap rule of their own (JAX does not batch ordered callbacks).

Gradients follow upstream Horovod's semantics (as in horovod.torch and
horovod.tensorflow): allreduce and broadcast through their primitive's
transpose (it is linear), the others as custom VJPs.

Under jit, output shapes must be known when tracing: allgather assumes every
rank contributes the same number of rows (checked when it runs), and
alltoall takes even splits only.

Thread-safety: as horovod.common.ops.
"""

import contextlib
import ctypes
import functools
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
from jax.interpreters import partial_eval as pe

from horovod import _core
from horovod.common import ops as _ops
from horovod.common.exceptions import (HorovodInternalError,  # noqa: F401
                                       HorovodInvalidArgumentError)
from horovod.common.ops import (Adasum, Average, Max, Min,  # noqa: F401
                                Product, Sum, resolve_op)
from horovod.common.process_sets import ProcessSet  # noqa: F401
from horovod.common.process_sets import global_process_set
from horovod.common.topology import *  # noqa: F401,F403
from horovod.common.topology import rank, size
from horovod.jax.host_collective import (host_arrays, numpy_collective,
                                         ordered_callback, readable, to_jax)

_collectives = _ops.process_collectives()
_OP = _ops.OpType
_ALLREDUCE = _OP.allreduce.value


# Types of the concrete arrays seen so far: a set lookup costs less than
# isinstance against jax.Array, and a concrete array's type is never a
# tracer's.
_CONCRETE_TYPES = set()


def _concrete(x):
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        _CONCRETE_TYPES.add(type(x))
        return True
    return False


def _traced(xs):
    return any(isinstance(x, jax.core.Tracer) for x in xs)


def _checked_numbers(reduce_op=Sum, prescale=1.0, postscale=1.0, root=0):
    reduce_op, prescale, postscale, root = _collectives.handles.numbers(
        reduce_op, prescale, postscale, root)
    return dict(reduce_op=reduce_op, prescale=prescale, postscale=postscale,
                root=root)


@contextlib.contextmanager
def _refusing(op, xs, prefix, name, process_set):
    """Input refused in the block (TypeError or ValueError) is refused to
    the operation's peers too, eagerly: their calls fail with the reason
    instead of waiting for this rank."""
    try:
        yield
    except (TypeError, ValueError) as e:
        _collectives.refuse(op, xs, prefix, name, process_set, e)
        raise


def _call(op, xs, prefix, name, process_set, out_specs, **kw):
    """The collective over the arrays xs: directly when they are concrete;
    when traced, allreduce and broadcast as Horovod's primitive (an XLA
    custom call), the others as one ordered io_callback, out_specs(xs)
    giving its output ShapeDtypeStructs."""
    xla = op in (_OP.allreduce, _OP.broadcast)
    eager = not _traced(xs)
    # NumPy's route: refused input is refused to the peers too (the XLA
    # handler numbers its unnamed calls itself, so they are not).
    host = eager and not (xla and all(isinstance(x, jax.Array) for x in xs))
    with (_refusing(op, xs, prefix, name, process_set) if host
          else contextlib.nullcontext()):
        if kw:  # checked as torch's are: a root of 1.5 is no rank 1
            kw = _checked_numbers(**kw)
        arrays = host_arrays(xs, prefix) if host else None
    if host:
        return numpy_collective(op, arrays, prefix, name, process_set, to_jax,
                                **kw)
    if eager:
        return _eager_xla(op.value, xs, prefix, name,
                          _collectives.process_set_id(process_set), **kw)
    xs = [jnp.asarray(x) for x in xs]
    if xla:
        _check_xla_dtypes(xs)
        return _collective_p.bind(*xs, **_xla_params(
            op.value, prefix, name, _collectives.process_set_id(process_set),
            **kw))
    return ordered_callback(op, prefix, name, process_set, out_specs, kw)(*xs)


_XLA_TARGET = "horovod_collective"
_xla_lock = threading.Lock()
_xla_registered = False
_XLA_DTYPES = frozenset(np.dtype(t) for t in (
    np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, jnp.bfloat16,
    np.float32, np.float64, np.bool_))


_collective_p = Primitive("horovod_collective")
_collective_p.multiple_results = True
_collective_p.def_abstract_eval(lambda *avals, **_: list(avals))
mlir.register_lowering(
    _collective_p, jax.ffi.ffi_lowering(_XLA_TARGET, has_side_effect=True),
    platform="cpu")
# Kept whether or not its results are used: the other ranks wait for it.
pe.dce_rules[_collective_p] = \
    lambda used_outputs, eqn: ([True] * len(eqn.invars), eqn)


def _collective_batch(args, dims, **params):
    """Under jax.vmap: allreduce and broadcast work element by element and
    keep each operand's shape, so the batched operands go through whole
    and each result keeps its operand's batch axis."""
    return _collective_p.bind(*args, **params), list(dims)


batching.primitive_batchers[_collective_p] = _collective_batch


def _collective_impl(*xs, kind, name, prefix, reduce_op, prescale,
                     postscale, root, process_set):
    """Outside jit (under jax.grad, say): the eager path."""
    ps = _collectives.basics.process_set_by_id(int(process_set))
    if int(kind) == _OP.allreduce.value:
        kw = dict(reduce_op=int(reduce_op), prescale=float(prescale),
                  postscale=float(postscale))
        op = _OP.allreduce
    else:
        kw, op = dict(root=int(root)), _OP.broadcast
    return numpy_collective(op, [np.asarray(x) for x in xs], prefix,
                            name or None, ps, to_jax, **kw)


def _collective_transpose(cts, *xs, kind, name, prefix, reduce_op, prescale,
                          postscale, root, process_set):
    """Upstream's gradients: allreduce's reduced the way the forward pass
    reduced; broadcast's averaged over the set and kept by the root. Both
    unnamed (numbered when they run)."""
    cts = [ad.instantiate_zeros(ct) for ct in cts]
    if int(kind) == _OP.allreduce.value:
        return _collective_p.bind(
            *cts, kind=kind, name="", prefix=prefix, reduce_op=reduce_op,
            prescale=prescale, postscale=postscale, root=root,
            process_set=process_set)
    reduced = _collective_p.bind(
        *cts, kind=np.int64(_OP.allreduce.value), name="",
        prefix="grouped_allreduce", reduce_op=np.int64(Average),
        prescale=np.float64(1.0), postscale=np.float64(1.0),
        root=np.int64(0), process_set=process_set)
    if rank() != int(root):
        reduced = [r * 0 for r in reduced]
    return reduced


_collective_p.def_impl(_collective_impl)
ad.deflinear2(_collective_p, _collective_transpose)


def _register_xla_target():
    """Registers Horovod's XLA FFI handler with JAX, once per process."""
    global _xla_registered
    if _xla_registered:
        return
    with _xla_lock:
        if not _xla_registered:
            handler = ctypes.cast(
                _core.xla_collective_handler(),
                ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p))
            jax.ffi.register_ffi_target(_XLA_TARGET, jax.ffi.pycapsule(handler),
                                        platform="cpu")
            _xla_registered = True


def _check_xla_dtypes(xs):
    for x in xs:
        if x.dtype not in _XLA_DTYPES:
            raise _ops.unsupported_dtype(np.dtype(x.dtype).name, rank())


def _xla_params(op, prefix, name, ps, reduce_op=Sum, prescale=1.0,
                postscale=1.0, root=0):
    """The primitive's parameters (typed as XLA's attributes)."""
    _register_xla_target()
    return dict(kind=np.int64(op), name=name or "", prefix=prefix,
                reduce_op=np.int64(reduce_op), prescale=np.float64(prescale),
                postscale=np.float64(postscale), root=np.int64(root),
                process_set=np.int64(ps))


@functools.lru_cache(maxsize=256)
def _jitted(op, prefix, name, ps, reduce_op=Sum, prescale=1.0, postscale=1.0,
            root=0):
    params = _xla_params(op, prefix, name, ps, reduce_op, prescale,
                         postscale, root)

    def call(*xs):
        # At trace time, once per dtypes and shapes (jit retraces for new
        # ones): checked here, a call costs nothing for the check.
        _check_xla_dtypes(xs)
        return _collective_p.bind(*xs, **params)
    return jax.jit(call)


def _eager_xla(op, xs, prefix, name, ps, reduce_op=Sum, prescale=1.0,
               postscale=1.0, root=0):
    """Eagerly, allreduce and broadcast of JAX arrays run as a jitted call
    of the XLA handler (compiled once per name, shapes and attributes): JAX
    dispatches it in microseconds, and the handler reads XLA's buffers and
    writes the result into XLA's, where the NumPy route pays conversions
    and a copy. XLA allocates each result afresh, which the engine's
    HOROVOD_KEEP_FREED_MEMORY keeps from faulting in new pages each call.
    `op` is an OpType's value."""
    _collectives.basics.engine  # ValueError before hvd.init()
    try:
        return _jitted(op, prefix, name, ps, reduce_op, prescale, postscale,
                       root)(*xs)
    except jax.errors.JaxRuntimeError as e:
        text = str(e)
        if text.startswith("INVALID_ARGUMENT"):
            raise HorovodInvalidArgumentError(text) from None
        raise HorovodInternalError(text) from None


def _same_specs(xs):
    return [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs]


def _check_rows(op, tensor, prefix, name, process_set):
    """These collectives work along dimension 0, which traced output
    shapes are computed from: a scalar is refused before that (and,
    eagerly, to the operation's peers)."""
    if np.ndim(tensor) == 0:
        if _traced([tensor]):
            raise HorovodInvalidArgumentError(_SCALAR % (prefix, rank()))
        with _refusing(op, [tensor], prefix, name, process_set):
            host_arrays([tensor], prefix)  # a dict is no scalar
            raise HorovodInvalidArgumentError(_SCALAR % (prefix, rank()))


_SCALAR = ("%s needs an array with at least one dimension, got a scalar "
           "(rank %d)")


def _set_size(process_set):
    return len(process_set.ranks) if process_set.ranks else size()


# -- allreduce ---------------------------------------------------------------

def _grouped_allreduce(xs, name, op, prescale, postscale, process_set,
                       prefix):
    """Differentiable when traced (the primitive is linear: its gradient is
    reduced the way the forward pass reduced, as upstream)."""
    return _call(_OP.allreduce, xs, prefix, name, process_set, _same_specs,
                 reduce_op=op, prescale=prescale, postscale=postscale)


def allreduce(tensor, average=None, name=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` over the ranks of the set (Average by default).
    Differentiable; works eagerly and under jax.jit."""
    op = resolve_op(average, op)
    if type(tensor) in _CONCRETE_TYPES or _concrete(tensor):
        # The path _call takes for a concrete array, without its layers: a
        # small allreduce's time is mostly per-call Python.
        op, prescale, postscale, _ = _collectives.handles.numbers(
            op, prescale_factor, postscale_factor)
        return _eager_xla(_ALLREDUCE, [tensor], "allreduce", name,
                          _collectives.process_set_id(process_set), op,
                          prescale, postscale)[0]
    return _grouped_allreduce([tensor], name, op, prescale_factor,
                              postscale_factor, process_set, "allreduce")[0]


def grouped_allreduce(tensors, average=None, name=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """allreduce of each array, negotiated and fused as one unit."""
    tensors = list(tensors)
    if not tensors:
        return []
    return _grouped_allreduce(tensors, name, resolve_op(average, op),
                              prescale_factor, postscale_factor, process_set,
                              "grouped_allreduce")


# -- allgather ---------------------------------------------------------------

def _gathered_specs(process_set):
    def specs(xs):
        n = _set_size(process_set)
        return [jax.ShapeDtypeStruct((x.shape[0] * n,) + x.shape[1:], x.dtype)
                for x in xs]
    return specs


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _allgather(x, name, process_set):
    return _call(_OP.allgather, [x], "allgather", name, process_set,
                 _gathered_specs(process_set))[0]


def _allgather_fwd(x, name, process_set):
    return _allgather(x, name, process_set), x


def _allgather_bwd(name, process_set, x, dy):
    # Upstream: the output gradient averaged over the set; each rank keeps
    # its own rows.
    dy = _grouped_allreduce([dy], None, Average, 1.0, 1.0, process_set,
                            "allreduce")[0]
    rows = x.shape[0]
    counts = _allgather(jnp.asarray([rows], jnp.int32), None, process_set)
    start = jnp.sum(jnp.where(jnp.arange(counts.shape[0]) <
                              process_set.rank(), counts, 0))
    return (jax.lax.dynamic_slice_in_dim(dy, start, rows, axis=0),)


_allgather.defvjp(_allgather_fwd, _allgather_bwd)


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's array along dimension 0 (differentiable).
    Under jit every rank must contribute the same number of rows."""
    _check_rows(_OP.allgather, tensor, "allgather", name, process_set)
    if not _traced([tensor]):
        return _call(_OP.allgather, [tensor], "allgather", name, process_set,
                     None)[0]
    return _allgather(tensor, name, process_set)


# -- broadcast ---------------------------------------------------------------

def _grouped_broadcast(xs, root_rank, name, process_set, prefix):
    """Differentiable when traced: upstream's gradient, averaged over the
    set and kept by the root."""
    return _call(_OP.broadcast, xs, prefix, name, process_set, _same_specs,
                 root=root_rank)


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's array on every rank (differentiable)."""
    return _grouped_broadcast([tensor], root_rank, name, process_set,
                              "broadcast")[0]


def broadcast_parameters(params, root_rank=0, name=None,
                         process_set=global_process_set):
    """Returns the pytree `params` with every leaf replaced by root_rank's
    value, broadcast as one negotiated unit."""
    leaves, tree = jax.tree_util.tree_flatten(params)
    if not leaves:
        return params
    if not _traced(leaves):
        out = _call(_OP.broadcast, leaves, "grouped_broadcast", name,
                    process_set, None, root=root_rank)
    else:
        out = _grouped_broadcast([jnp.asarray(x) for x in leaves],
                                 root_rank, name, process_set,
                                 "grouped_broadcast")
    return jax.tree_util.tree_unflatten(tree, out)


broadcast_variables = broadcast_parameters


# -- alltoall ----------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def _alltoall(x, splits, name, process_set):
    traced = _traced([x])
    if traced and splits:
        raise HorovodInvalidArgumentError(
            "alltoall under jax.jit takes even splits only (splits=None): "
            "the received sizes must be known when tracing (rank %d)"
            % rank())
    holder = {}

    def run(op, arrays, prefix, nm, ps, **kw):
        out = _collectives.synchronize(_collectives.enqueue(
            op, [readable(a) for a in arrays], prefix, nm,
            lambda chs: (_ops.output_numpy(chs[0]),
                         list(chs[0].received_splits)),
            process_set=ps, **kw))
        holder["received"] = out[1]
        return [out[0]]
    if not traced:
        try:
            out = run(_OP.alltoall, [np.asarray(x)], "alltoall", name,
                      process_set, splits=list(splits))
        finally:
            _collectives.leave_census()
        return jnp.asarray(out[0]), jnp.asarray(holder["received"],
                                                jnp.int32)
    n = _set_size(process_set)
    received = jnp.full((n,), x.shape[0] // n, jnp.int32)
    return _call(_OP.alltoall, [x], "alltoall", name, process_set,
                 _same_specs)[0], received


def _alltoall_fwd(x, splits, name, process_set):
    out, received = _alltoall(x, splits, name, process_set)
    return (out, received), received


def _alltoall_bwd(splits, name, process_set, received, grads):
    dy, _ = grads
    if splits:
        back, _ = _alltoall(dy, tuple(int(s) for s in np.asarray(received)),
                            None, process_set)
    else:
        back, _ = _alltoall(dy, (), None, process_set)
    return (back,)


_alltoall.defvjp(_alltoall_fwd, _alltoall_bwd)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[i] rows of `tensor` to rank i of the set (even splits
    when None). Returns the received rows and the received splits, as
    horovod.tensorflow. Differentiable in `tensor`."""
    if splits is None:
        counts = ()
    else:
        counts = np.asarray(splits)
        if not np.issubdtype(counts.dtype, np.integer):
            raise HorovodInvalidArgumentError(
                "alltoall splits must be integers, got %s (rank %d)"
                % (counts.dtype, rank()))
        counts = tuple(int(s) for s in counts.reshape(-1))
    _check_rows(_OP.alltoall, tensor, "alltoall", name, process_set)
    return _alltoall(jnp.asarray(tensor), counts, name, process_set)


# -- reducescatter -----------------------------------------------------------

def _scattered_specs(process_set):
    def specs(xs):
        n = _set_size(process_set)
        me = process_set.rank()
        out = []
        for x in xs:
            rows = x.shape[0] // n + (1 if me < x.shape[0] % n else 0)
            out.append(jax.ShapeDtypeStruct((rows,) + x.shape[1:], x.dtype))
        return out
    return specs


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3, 4, 5))
def _reducescatter(x, name, op, prescale, postscale, process_set):
    return _call(_OP.reducescatter, [x], "reducescatter", name, process_set,
                 _scattered_specs(process_set), reduce_op=op,
                 prescale=prescale, postscale=postscale)[0]


def _reducescatter_fwd(x, name, op, prescale, postscale, process_set):
    return _reducescatter(x, name, op, prescale, postscale, process_set), None


def _reducescatter_bwd(name, op, prescale, postscale, process_set, _, dy):
    # Upstream: the output gradient gathered back to full shape, times the
    # set size for Sum; the scale factors apply as in the forward pass.
    scale = prescale * postscale
    if op == Sum:
        scale *= _set_size(process_set)
    grad = _call(_OP.allgather, [dy], "allgather", None, process_set,
                 _gathered_specs(process_set))[0]
    return (grad * scale if scale != 1.0 else grad,)


_reducescatter.defvjp(_reducescatter_fwd, _reducescatter_bwd)


def reducescatter(tensor, name=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces `tensor` over the set and returns this rank's share of
    dimension 0 (the first dim0 % size ranks get one extra row).
    Differentiable."""
    op = Average if op is None else op
    _check_rows(_OP.reducescatter, tensor, "reducescatter", name,
                process_set)
    if not _traced([tensor]):  # _call checks the numbers
        return _call(_OP.reducescatter, [tensor], "reducescatter", name,
                     process_set, None, reduce_op=op, prescale=prescale_factor,
                     postscale=postscale_factor)[0]
    # Checked before the gradient, which computes with them, sees them.
    op, prescale, postscale, _ = _collectives.handles.numbers(
        op, prescale_factor, postscale_factor)
    return _reducescatter(jnp.asarray(tensor), name, op, prescale, postscale,
                          process_set)


# -- control -----------------------------------------------------------------

def barrier(process_set=global_process_set):
    """Blocks until every rank of the set has called barrier (not inside
    jit)."""
    _ops.leaving_census(_collectives, _collectives.barrier, process_set)


def join():
    """Declares this rank out of data; returns the last rank to join."""
    return _ops.leaving_census(_collectives, _collectives.join)


def broadcast_object(obj, root_rank=0, name=None,
                     process_set=global_process_set):
    """Serializes obj on root_rank with cloudpickle and returns a copy of it
    on every rank."""
    return _ops.broadcast_object(_collectives, obj, root_rank, name,
                                 process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's obj, in rank order."""
    return _ops.allgather_object(_collectives, obj, name, process_set)
