"""Collective operations on TensorFlow tensors, with upstream Horovod's names,
signatures, defaults, gradients and error types.

Every collective is one op of Horovod's op library (op_library.py), eagerly
and in tf.function or tf.compat.v1 graphs alike: its kernel hands the
tensors' memory to the engine and waits. Each forward and each backward is
one kernel call, which starts all of its operations before waiting for any.
Join, barrier and the topology ops are in control_ops.py. XLA cannot call
the engine: under jit_compile=True the collectives refuse to be traced.

Names: eagerly, an unnamed operation is numbered per process set
(`allreduce.noname.<N>`), as in horovod.torch. In a graph it is named at trace
time after its input tensor, as upstream does, so each execution of the graph
reuses one name and the engine's response cache serves it.

Thread-safety: as horovod.common.ops; every function may be called from any
thread.
"""

import numbers
import re

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import record
from tensorflow.python.framework.ops import EagerTensor as _EagerTensor
from tensorflow.python.ops import control_flow_util

from horovod.common import ops as _ops
from horovod.common.compression import checked as checked_compression
from horovod.common.exceptions import (HorovodInternalError,  # noqa: F401
                                       HorovodInvalidArgumentError)
from horovod.common.ops import (Adasum, Average, Max, Min,  # noqa: F401
                                Product, Sum, resolve_op)
from horovod.common.process_sets import ProcessSet  # noqa: F401
from horovod.common.process_sets import global_process_set
from horovod.common.topology import *  # noqa: F401,F403
from horovod.common.topology import rank
from horovod.tensorflow import op_library as _lib
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.op_library import Unit

_collectives = _ops.process_collectives()
# The main thread may next block inside a tf.function (see leaving_census).
add_process_set, remove_process_set = \
    _ops.process_set_calls_leaving_census(_collectives)


def _normalize_name(name):
    """An operation name made of TensorFlow's name characters."""
    return re.sub("[^a-zA-Z0-9_]", "_", name)


def _op_name(kind, tensor, name, ignore_name_scope):
    """The name an operation negotiates under. Eagerly: as given (None
    numbers it). In a graph: as given or after the input tensor, under the
    current name scope unless ignore_name_scope, made unique in the graph
    so one graph never submits two operations under one name."""
    if tf.executing_eagerly():
        return name
    graph = tf.compat.v1.get_default_graph()
    if name is None:
        name = "%s_%s" % (kind, _normalize_name(tensor.name))
    if not ignore_name_scope:
        scope = graph.get_name_scope()
        if scope:
            name = scope + "/" + name
    return graph.unique_name(name, mark_as_used=True)


def _as_tensor(t):
    """`t` as a tensor of the current context. In a graph an eager tensor
    from outside (a tf.function's closure) is captured: as it is, it has no
    name to name the operation after."""
    if isinstance(t, tf.Tensor) and (type(t) is not _EagerTensor
                                     or tf.executing_eagerly()):
        return t
    try:
        return tf.convert_to_tensor(t)
    except (TypeError, ValueError) as e:
        # A RaggedTensor or SparseTensor has no dense form to convert to.
        raise TypeError(
            "Horovod collectives take tensors, variables, arrays and "
            "IndexedSlices; a %s cannot be converted to a tensor (rank "
            "%d): %s" % (type(t).__name__, rank(), e)) from None


def _check_not_xla():
    if control_flow_util.GraphOrParentsInXlaContext(
            tf.compat.v1.get_default_graph()):
        raise NotImplementedError(
            "horovod.tensorflow collectives cannot run under XLA "
            "(tf.function(jit_compile=True) or a Keras model compiled with "
            "jit_compile=True): XLA cannot call back into Horovod's engine. "
            "Compile without jit_compile (rank %d)" % rank())


def _synchronous(fn, inputs):
    """fn(inputs), after which this thread, its collectives finished, stops
    counting as a submitter: graph collectives run on TensorFlow's pool
    threads, which would otherwise count for ever and hide a rank that is
    blocked from the engine's deadlock check."""
    return _ops.leaving_census(_collectives, fn, inputs)


def _run(fn, inputs, touts):
    """Runs fn (a list of eager tensors in, a list out) now when eager, or
    as one py_function of the graph being built."""
    inputs = list(inputs)
    if tf.executing_eagerly():
        return _synchronous(fn, inputs)
    _check_not_xla()
    return tf.py_function(lambda *xs: _synchronous(fn, list(xs)), inputs,
                          list(touts))


def _differentiable(forward, backward, tensors):
    """forward(tensors) with backward(output grads) as its gradient, for
    floating-point inputs; integer inputs have no gradient. Eagerly with no
    tape recording there is nothing to differentiate, and the gradient
    wrapper (a large share of a small collective's time) is skipped."""
    if (tf.executing_eagerly() and not record.could_possibly_record()) or \
            not all(t.dtype.is_floating for t in tensors):
        return forward(tensors)

    @tf.custom_gradient
    def op(*xs):
        ys = forward(list(xs))

        def grad(*dys):
            dys = [tf.zeros_like(y) if dy is None else dy
                   for y, dy in zip(ys, dys)]
            return backward(dys)
        return ys, grad
    return list(op(*tensors))


# -- running collectives --------------------------------------------------

_SUPPORTED = frozenset([tf.uint8, tf.int8, tf.int16, tf.int32, tf.int64,
                        tf.float16, tf.bfloat16, tf.float32, tf.float64,
                        tf.bool])
# The same as TensorFlow's DataType enum values: an eager tensor reports
# its enum faster than its DType.
_SUPPORTED_ENUMS = frozenset(t.as_datatype_enum for t in _SUPPORTED)


def _prepare(tensors, process_set, units):
    """Checks before an op: the process set, init when eager, XLA in a
    graph, dtypes (TensorFlow would fail less clearly; eagerly refused to
    the units' peers too). Returns the set's id and whether this runs
    eagerly."""
    ps = _collectives.process_set_id(process_set)
    eager = tf.executing_eagerly()
    if eager:
        _collectives.basics.engine  # ValueError before hvd.init()
    else:
        _check_not_xla()
    with _lib.refusing(units, ps, eager):
        for t in tensors:
            if t.dtype not in _SUPPORTED:
                raise _ops.unsupported_dtype(t.dtype.name, rank())
    return ps, eager


def _refuse(kind, count, prefix, name, process_set, error):
    """For input refused before an op of `count` tensors was made: eagerly,
    the op's peers fail with the reason rather than wait for this rank
    (Collectives.refuse, which skips a job not started or a set this rank
    cannot run on)."""
    if tf.executing_eagerly():
        _collectives.refuse(_ops.OpType(kind), range(count), prefix, name,
                            process_set, error)


def _tensors(values, kind, prefix, name, process_set):
    """`values` as tensors of the current context (_as_tensor), the input
    of one op; a value refused is refused to the op's peers too."""
    try:
        return [_as_tensor(v) for v in values]
    except (TypeError, ValueError) as e:
        _refuse(kind, len(values), prefix, name, process_set, e)
        raise


def _same_shape(x):
    return x.shape


def _run_units(units, tensors, process_set, shapes, **kw):
    """Runs `units` (op_library.Unit) over `tensors` as one kernel call, now
    when eager, else as one op of the graph being built, whose outputs get
    the static `shapes`: a list, or a function of each input tensor (only
    called in graphs: eager tensors have their shapes, and asking costs)."""
    units = tuple(units)
    ps, eager = _prepare(tensors, process_set, units)
    outs = _lib.collective(units, tensors, ps, eager, **kw)
    if eager:
        return outs
    if callable(shapes):
        shapes = [shapes(x) for x in tensors]
    return _set_shapes(outs, shapes)


def _splits(splits):
    """alltoall's splits as an int64 tensor (empty: even splits)."""
    if splits is None:
        return tf.zeros([0], tf.int64)
    if isinstance(splits, (tf.Tensor, tf.Variable)):
        dtype = tf.as_dtype(splits.dtype)
    elif isinstance(splits, np.ndarray):
        dtype = tf.as_dtype(splits.dtype)
        splits = splits.reshape(-1)
    else:
        counts = list(splits)
        for s in counts:
            if not isinstance(s, numbers.Integral) or isinstance(s, bool):
                raise HorovodInvalidArgumentError(
                    "alltoall splits must be integers, got %r (rank %d)"
                    % (s, rank()))
        return tf.constant([int(s) for s in counts], dtype=tf.int64)
    if not dtype.is_integer:
        raise HorovodInvalidArgumentError(
            "alltoall splits must be integers, got %s (rank %d)"
            % (dtype.name, rank()))
    return tf.cast(tf.reshape(splits, [-1]), tf.int64)


def _rows_of_this_rank(grad, table, i, process_set):
    """This rank's rows of a gradient of an allgather output; table[r, i] is
    rank r's dim 0 of tensor i."""
    me = process_set.rank()
    start = tf.reduce_sum(table[:me, i])
    return grad[start:start + table[me, i]]


def _dim0(tensor):
    if tensor.shape.rank == 0:
        return tf.constant(0, tf.int64)
    return tf.shape(tensor, out_type=tf.int64)[0]


def _set_shapes(outs, shapes):
    """Static shapes for a graph's op outputs (eager tensors have theirs
    already)."""
    if not tf.executing_eagerly():
        for o, s in zip(outs, shapes):
            o.set_shape(s)
    return outs


def _rows_unknown(tensor):
    shape = tensor.shape
    if shape.rank is None or shape.rank == 0:
        return shape
    return tf.TensorShape([None]).concatenate(shape[1:])


# -- allreduce ---------------------------------------------------------------

def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0,
                       postscale_factor=1.0, ignore_name_scope=False,
                       process_set=global_process_set,
                       prefix="grouped_allreduce"):
    tensors = [_as_tensor(t) for t in tensors]
    if not tensors:
        return []
    name = _op_name("HorovodAllreduce", tensors[0], name, ignore_name_scope)

    def forward(xs):
        return _run_units([Unit(_lib.ALLREDUCE, len(xs), prefix, name)], xs,
                          process_set, _same_shape, reduce_op=op,
                          prescale=prescale_factor,
                          postscale=postscale_factor)

    def backward(dys):
        return _grouped_allreduce(dys, None, op, prescale_factor,
                                  postscale_factor, True, process_set, prefix)
    return _differentiable(forward, backward, tensors)


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0,
               postscale_factor=1.0, ignore_name_scope=False,
               process_set=global_process_set):
    """Reduces `tensor` over the set (differentiable; no compression)."""
    return _grouped_allreduce([tensor], name, op, prescale_factor,
                              postscale_factor, ignore_name_scope,
                              process_set, prefix="allreduce")[0]


def _sparse_allreduce(slices, name, op, prescale_factor, postscale_factor,
                      ignore_name_scope, process_set):
    """An IndexedSlices is reduced by gathering every rank's values and
    indices (values averaged for Average), as upstream."""
    if op not in (Average, Sum):
        raise HorovodInvalidArgumentError(
            "allreduce of tf.IndexedSlices supports op=Average or Sum only "
            "(rank %d); pass sparse_as_dense=True to reduce it densely"
            % rank())
    values, indices = _grouped_allgather(
        [slices.values, slices.indices],
        None if name is None else name + "_sparse", ignore_name_scope,
        process_set)
    return tf.IndexedSlices(
        _scale_gathered_values(values, op, prescale_factor, postscale_factor,
                               process_set),
        indices, dense_shape=slices.dense_shape)


def _scale_gathered_values(values, op, prescale, postscale, process_set):
    """Gathered sparse values scaled as a dense reduction with `op` and the
    scale factors would be (divided by the set size for Average)."""
    scale = prescale * postscale
    if op == Average:
        scale /= process_set.size()
    return values * tf.cast(scale, values.dtype) if scale != 1.0 else values


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, name=None,
              process_set=global_process_set, ignore_name_scope=False):
    """Reduces `tensor` over every rank of the process set (Average by
    default). A tf.IndexedSlices is allgathered instead. Differentiable."""
    op = resolve_op(average, op)
    if (compression is None and type(tensor) is _EagerTensor
            and tf.executing_eagerly()
            and tensor._datatype_enum() in _SUPPORTED_ENUMS
            and not record.could_possibly_record()):
        # Eagerly with nothing to differentiate or compress: straight to the
        # op. A small allreduce's time is mostly per-call Python.
        _collectives.basics.engine  # ValueError before hvd.init()
        return _lib.collective(
            _lib.allreduce_units(name), [tensor],
            _collectives.process_set_id(process_set), True, op,
            prescale_factor, postscale_factor)[0]
    if isinstance(tensor, tf.IndexedSlices):
        return _sparse_allreduce(tensor, name, op, prescale_factor,
                                 postscale_factor, ignore_name_scope,
                                 process_set)
    compression = checked_compression(compression, Compression.none)
    compressed, ctx = compression.compress(
        _tensors([tensor], _lib.ALLREDUCE, "allreduce", name,
                 process_set)[0])
    reduced = _allreduce(compressed, name, op, prescale_factor,
                         postscale_factor, ignore_name_scope, process_set)
    return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors, average=None, device_dense="",
                      device_sparse="", compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set, ignore_name_scope=False,
                      name=None):
    """allreduce of each tensor, negotiated and fused as one unit."""
    op = resolve_op(average, op)
    tensors = list(tensors)
    sparse = [i for i, t in enumerate(tensors)
              if isinstance(t, tf.IndexedSlices)]
    out = list(tensors)
    for i in sparse:
        out[i] = _sparse_allreduce(
            tensors[i], None if name is None else "%s_%d" % (name, i), op,
            prescale_factor, postscale_factor, ignore_name_scope, process_set)
    dense = [i for i in range(len(tensors)) if i not in sparse]
    compression = checked_compression(compression, Compression.none)
    pairs = [compression.compress(t) for t in _tensors(
        [tensors[i] for i in dense], _lib.ALLREDUCE, "grouped_allreduce",
        name, process_set)]
    reduced = _grouped_allreduce([c for c, _ in pairs], name, op,
                                 prescale_factor, postscale_factor,
                                 ignore_name_scope, process_set)
    for i, r, (_, ctx) in zip(dense, reduced, pairs):
        out[i] = compression.decompress(r, ctx)
    return out


# -- allgather ---------------------------------------------------------------

def _grouped_allgather(tensors, name=None, ignore_name_scope=False,
                       process_set=global_process_set,
                       prefix="grouped_allgather"):
    tensors = _tensors(tensors, _lib.ALLGATHER, prefix, name, process_set)
    if not tensors:
        return []
    name = _op_name("HorovodAllgather", tensors[0], name, ignore_name_scope)

    def forward(xs):
        return _run_units([Unit(_lib.ALLGATHER, len(xs), prefix, name)], xs,
                          process_set, _rows_unknown)

    def backward(dys):
        # Upstream: each output gradient averaged over the set, then every
        # rank keeps its own rows; the ranks' row counts travel in the same
        # kernel call.
        n = len(dys)
        dim0s = tf.reshape(tf.stack([_dim0(x) for x in tensors]), [1, n])
        grad_name = _op_name("HorovodAllgatherGrad", dys[0], None, True)
        outs = _run_units(
            [Unit(_lib.ALLREDUCE, n, "grouped_allreduce", grad_name),
             Unit(_lib.ALLGATHER, 1, "allgather",
                  grad_name and grad_name + "_rows")],
            dys + [dim0s], process_set,
            [d.shape for d in dys] + [[None, n]], reduce_op=Average)
        table = tf.reshape(outs[n], [process_set.size(), n])
        return _set_shapes([_rows_of_this_rank(g, table, i, process_set)
                            for i, g in enumerate(outs[:n])],
                           [x.shape for x in tensors])
    return _differentiable(forward, backward, tensors)


def allgather(tensor, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """Concatenates every rank's tensor along dimension 0 (differentiable)."""
    return _grouped_allgather([tensor], name, ignore_name_scope, process_set,
                              prefix="allgather")[0]


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """allgather of each tensor, negotiated as one unit (differentiable)."""
    return _grouped_allgather(list(tensors), name, ignore_name_scope,
                              process_set)


# -- broadcast ---------------------------------------------------------------

def _grouped_broadcast(tensors, root_rank, name=None, ignore_name_scope=False,
                       process_set=global_process_set,
                       prefix="grouped_broadcast"):
    tensors = _tensors(tensors, _lib.BROADCAST, prefix, name, process_set)
    if not tensors:
        return []
    name = _op_name("HorovodBroadcast", tensors[0], name, ignore_name_scope)

    def forward(xs):
        return _run_units([Unit(_lib.BROADCAST, len(xs), prefix, name)], xs,
                          process_set, _same_shape, root=root_rank)

    def backward(dys):
        # Upstream: the gradient averaged over the set, kept by the root.
        reduced = _grouped_allreduce(dys, None, Average,
                                     ignore_name_scope=True,
                                     process_set=process_set)
        if rank() != root_rank:
            reduced = [r * 0 for r in reduced]
        return reduced
    return _differentiable(forward, backward, tensors)


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """Returns root_rank's tensor on every rank (differentiable)."""
    return _grouped_broadcast([tensor], root_rank, name, ignore_name_scope,
                              process_set, prefix="broadcast")[0]


def broadcast_(variables, root_rank, name=None,
               process_set=global_process_set):
    """Overwrites each variable with root_rank's value, as one negotiated
    unit. Returns the variables (eagerly) or the assign ops (in a graph)."""
    single = not isinstance(variables, (list, tuple))
    variables = [variables] if single else list(variables)
    for v in variables:
        if not callable(getattr(v, "assign", None)):
            error = HorovodInvalidArgumentError(
                "broadcast_ works in place on variables (tf.Variable or "
                "keras.Variable), got %s (rank %d)" % (type(v).__name__,
                                                       rank()))
            _refuse(_lib.BROADCAST, len(variables), "grouped_broadcast",
                    name, process_set, error)
            raise error
    values = _grouped_broadcast([tf.convert_to_tensor(v) for v in variables],
                                root_rank, name, process_set=process_set)
    out = [v.assign(x) for v, x in zip(variables, values)]
    return out[0] if single else out


# -- alltoall ----------------------------------------------------------------

def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends splits[i] rows of `tensor` to rank i of the set (even splits
    when None). Returns the received rows and the received splits (int32),
    as upstream. Differentiable in `tensor`."""
    try:
        tensor = _as_tensor(tensor)
        splits = _splits(splits)
    except (TypeError, ValueError) as e:
        _refuse(_lib.ALLTOALL, 1, "alltoall", name, process_set, e)
        raise
    name = _op_name("HorovodAlltoall", tensor, name, ignore_name_scope)
    units = (Unit(_lib.ALLTOALL, 1, "alltoall", name),)

    def exchange(x):
        ps, eager = _prepare([x], process_set, units)
        return _set_shapes(
            list(_lib.alltoall(x, splits, "alltoall", name, ps, eager)),
            [_rows_unknown(x), [None]])

    if not tensor.dtype.is_floating or (
            tf.executing_eagerly() and not record.could_possibly_record()):
        return tuple(exchange(tensor))

    @tf.custom_gradient
    def op(x):
        out, received = exchange(x)

        def grad(dy, _):
            back, _ = alltoall(dy, received, ignore_name_scope=True,
                               process_set=process_set)
            back.set_shape(x.shape)
            return back
        return (out, received), grad
    return op(tensor)


# -- reducescatter -----------------------------------------------------------

def _grouped_reducescatter(tensors, name=None, op=Average, prescale_factor=1.0,
                           postscale_factor=1.0, ignore_name_scope=False,
                           process_set=global_process_set,
                           prefix="grouped_reducescatter"):
    tensors = _tensors(tensors, _lib.REDUCESCATTER, prefix, name,
                       process_set)
    if not tensors:
        return []
    name = _op_name("HorovodReducescatter", tensors[0], name,
                    ignore_name_scope)

    def forward(xs):
        return _run_units([Unit(_lib.REDUCESCATTER, len(xs), prefix, name)],
                          xs, process_set, _rows_unknown, reduce_op=op,
                          prescale=prescale_factor,
                          postscale=postscale_factor)

    def backward(dys):
        # Upstream: each rank's output gradient gathered back to full shape,
        # times the set size for Sum; the scale factors apply as forward.
        scale = prescale_factor * postscale_factor
        if op == Sum:
            scale *= process_set.size()
        gathered = _run_units(
            [Unit(_lib.ALLGATHER, len(dys), "grouped_allgather",
                  _op_name("HorovodReducescatterGrad", dys[0], None, True))],
            dys, process_set, [x.shape for x in tensors])
        if scale != 1.0:
            gathered = [g * tf.cast(scale, g.dtype) for g in gathered]
        return gathered
    return _differentiable(forward, backward, tensors)


def reducescatter(tensor, device_dense="", compression=None, op=Average,
                  name=None, process_set=global_process_set,
                  ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces `tensor` over the set and returns this rank's share of
    dimension 0 (the first dim0 % size ranks get one extra row).
    Differentiable."""
    compression = checked_compression(compression, Compression.none)
    compressed, ctx = compression.compress(
        _tensors([tensor], _lib.REDUCESCATTER, "reducescatter", name,
                 process_set)[0])
    out = _grouped_reducescatter([compressed], name,
                                 Average if op is None else op,
                                 prescale_factor, postscale_factor,
                                 ignore_name_scope, process_set,
                                 prefix="reducescatter")[0]
    return compression.decompress(out, ctx)


def grouped_reducescatter(tensors, device_dense="", compression=None,
                          op=Average, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0,
                          name=None, ignore_name_scope=False):
    """reducescatter of each tensor, negotiated as one unit."""
    compression = checked_compression(compression, Compression.none)
    pairs = [compression.compress(t) for t in _tensors(
        list(tensors), _lib.REDUCESCATTER, "grouped_reducescatter", name,
        process_set)]
    outs = _grouped_reducescatter([c for c, _ in pairs], name,
                                  Average if op is None else op,
                                  prescale_factor, postscale_factor,
                                  ignore_name_scope, process_set)
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]
