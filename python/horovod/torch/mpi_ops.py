"""Collective operations on torch tensors, with upstream Horovod's names,
signatures, defaults, gradients and error types. A thin adapter over
horovod.common: tensors cross into the engine as DLPack without a copy, the
engine validates them, and results come back the same way."""

import torch

from horovod.common import ops as _ops
from horovod.common.compression import checked as checked_compression
from horovod.common.exceptions import HorovodInternalError  # noqa: F401
from horovod.common.exceptions import HorovodInvalidArgumentError  # noqa: F401
from horovod.common.grouping import op_named
from horovod.common.ops import (Adasum, Average, Max, Min,  # noqa: F401
                                Product, Sum, resolve_op)
from horovod.common.process_sets import ProcessSet  # noqa: F401
from horovod.common.process_sets import global_process_set
from horovod.common.topology import *  # noqa: F401,F403
from horovod.common.topology import rank
from horovod.torch.compression import Compression
from horovod.torch.tensor_input import (  # what the engine reads
    broadcast_output as _broadcast_output, engine_input as _input,
    engine_inputs as _inputs, inplace_targets as _inplace_targets,
    read as _read, refused as _refused,
    sources_and_outputs as _sources_and_outputs, split_counts as _split_counts,
    to_dlpack as _to_dlpack, unreadable as _unreadable)


_collectives = _ops.process_collectives()
_handles = _collectives.handles  # for the per-call paths
_OP = _ops.OpType
_ALLREDUCE = _OP.allreduce.value


def _enqueue(*args, **kwargs):
    """Collectives.enqueue with torch's own DLPack export, which skips the
    checks of ``Tensor.__dlpack__`` (microseconds a call)."""
    return _collectives.enqueue(*args, export=_to_dlpack,
                                explain=_unreadable, **kwargs)


# The handle table's own methods: no Python frame per call.
poll = _handles.poll
synchronize = _handles.synchronize


def _engine_tensor(core_handle):
    return torch.from_dlpack(_ops.output_array(core_handle))


def _engine_tensors(core_handles):
    return [_engine_tensor(h) for h in core_handles]


def _first_engine_tensor(core_handles):
    return _engine_tensor(core_handles[0])


def _apply(function, *args):
    """`function.apply(*args)` where autograd records the operation (grad
    mode on and an input that requires grad); elsewhere its forward alone,
    which computes the same outputs (none of which would require grad)
    without apply's cost of several microseconds a call."""
    if torch.is_grad_enabled():
        for a in args:  # a loop: any() over a generator costs a microsecond
            if isinstance(a, torch.Tensor) and a.requires_grad:
                return function.apply(*args)
    return function.forward(_Unrecorded(), *args)


class _Unrecorded:
    """The context a forward run outside autograd writes into and drops."""

    def mark_non_differentiable(self, *_):
        pass


# -- allreduce ---------------------------------------------------------------

def _allreduce_async_(tensor, average=None, name=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    # The forms allreduce_async_ (below) does not file in C. torch's DLPack
    # export takes tensors that require grad as they are (the engine writes
    # the memory, as through a detached view), and synchronize returns the
    # tensor itself.
    try:
        if tensor.is_contiguous():  # written where it lies
            capsule = _to_dlpack(tensor)
        else:
            capsule = None
            works, finish = _inplace_targets([tensor])
    except Exception as e:
        raise _refused(e, [tensor], _OP.allreduce, "allreduce", name,
                       process_set) from None
    if capsule is not None:
        return _collectives.enqueue_one(
            _ALLREDUCE, capsule, tensor, "allreduce", name, None,
            resolve_op(average, op), prescale_factor, postscale_factor,
            process_set=process_set)
    return _enqueue(
        _OP.allreduce, works, "allreduce", name, lambda c: finish(c)[0],
        resolve_op(average, op), prescale_factor, postscale_factor,
        process_set=process_set)


# What a training loop submits per gradient (named, contiguous, on the
# global set) runs in one C call; everything else in the function above.
allreduce_async_ = _collectives.allreduce_async_function(_to_dlpack,
                                                         _allreduce_async_)


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    # Out of place in the engine, which reads the input where it lies: a
    # copy into the result first would cost a pass over the data and, with
    # torch's default threads, a parallel copy whose workers keep spinning
    # on the cores the exchange needs. torch's DLPack export takes a tensor
    # that requires grad as it is, and empty_like's result requires none.
    try:
        if tensor.is_contiguous():
            output = torch.empty_like(tensor,
                                      memory_format=torch.contiguous_format)
            target, source = _to_dlpack(output), _to_dlpack(tensor)
        else:  # the copy a strided input needs anyway, reduced in place
            output, source = tensor.detach().contiguous(), None
    except Exception as e:  # inline: this path runs once per call
        raise _refused(e, [tensor], _OP.allreduce, "allreduce", name,
                       process_set) from None
    if source is None:
        return allreduce_async_(output, average, name, op, prescale_factor,
                                postscale_factor, process_set)
    if process_set is global_process_set and type(name) is str and name:
        return _handles.enqueue_one(
            _ALLREDUCE, target, output, None, "allreduce", name,
            resolve_op(average, op), prescale_factor, postscale_factor, 0, 0,
            source)
    return _collectives.enqueue_one(
        _ALLREDUCE, target, output, "allreduce", name, None,
        resolve_op(average, op), prescale_factor, postscale_factor,
        process_set=process_set, source=source)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    return synchronize(allreduce_async_(tensor, average, name, op,
                                        prescale_factor, postscale_factor,
                                        process_set))


class HorovodAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor,
                postscale_factor, process_set):
        ctx.args = (average, op, prescale_factor, postscale_factor, process_set)
        return synchronize(allreduce_async(tensor, average, name, op,
                                           prescale_factor, postscale_factor,
                                           process_set))

    @staticmethod
    def backward(ctx, grad_output):
        average, op, pre, post, ps = ctx.args
        grad = synchronize(allreduce_async(grad_output, average, None, op, pre,
                                           post, ps))
        return grad, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=None, op=None,
              prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """Returns the reduction of `tensor` over all ranks (differentiable)."""
    # No call for the usual None: this is a per-call path.
    compression = Compression.none if compression is None else \
        checked_compression(compression, None)
    compressed, ctx = compression.compress(tensor)
    out = _apply(HorovodAllreduce, compressed, average, name, op,
                 prescale_factor, postscale_factor, process_set)
    return compression.decompress(out, ctx)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    tensors = list(tensors)
    works, finish = _read(lambda: _inplace_targets(tensors), tensors,
                          _OP.allreduce, "grouped_allreduce", name,
                          process_set)
    return _enqueue(
        _OP.allreduce, works, "grouped_allreduce", name, finish,
        resolve_op(average, op), prescale_factor, postscale_factor,
        process_set=process_set)


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    # Out of place in the engine, as allreduce_async; strided inputs are
    # copied, as the engine reads compact ones only.
    tensors = list(tensors)
    sources, outs = _read(lambda: _sources_and_outputs(tensors), tensors,
                          _OP.allreduce, "grouped_allreduce", name,
                          process_set)
    return _enqueue(
        _OP.allreduce, outs, "grouped_allreduce", name, lambda _: outs,
        resolve_op(average, op), prescale_factor, postscale_factor,
        process_set=process_set, sources=sources)


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(
        tensors, average, name, op, prescale_factor, postscale_factor,
        process_set))


class HorovodGroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor,
                process_set, *tensors):
        ctx.args = (average, op, prescale_factor, postscale_factor, process_set)
        return tuple(synchronize(grouped_allreduce_async(
            tensors, average, name, op, prescale_factor, postscale_factor,
            process_set)))

    @staticmethod
    def backward(ctx, *grads):
        average, op, pre, post, ps = ctx.args
        out = synchronize(grouped_allreduce_async(list(grads), average, None,
                                                  op, pre, post, ps))
        return (None,) * 6 + tuple(out)


def grouped_allreduce(tensors, average=None, name=None, compression=None,
                      op=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    compression = checked_compression(compression, Compression.none)
    pairs = [compression.compress(t) for t in tensors]
    outs = _apply(HorovodGroupedAllreduce, average, name, op,
                  prescale_factor, postscale_factor, process_set,
                  *[c for c, _ in pairs])
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Allreduce of a sparse COO tensor: every rank's indices and values are
    gathered (values divided by the set size for Average). Returns a
    callable that waits and returns the sparse result, as upstream."""
    error = None
    if not isinstance(tensor, torch.Tensor) or \
            tensor.layout is not torch.sparse_coo:
        error = HorovodInvalidArgumentError(
            "sparse_allreduce_async takes a sparse COO tensor, got %s "
            "(rank %d); hvd.allreduce_async reduces dense ones" % (
                "a %s tensor" % str(tensor.layout)[6:]
                if isinstance(tensor, torch.Tensor)
                else type(tensor).__name__, rank()))
    elif op not in (Average, Sum):
        error = HorovodInvalidArgumentError(
            "sparse_allreduce_async reduces by Average or Sum, got op %s "
            "(rank %d)" % (op_named(op), rank()))
    if error is not None:
        # Its peers' two allgathers fail with the reason too.
        for part in (".indices", ".values"):
            _collectives.refuse(_OP.allgather, [tensor], "allgather",
                                name + part if name else None, process_set,
                                error)
        raise error
    indices = allgather_async(tensor._indices().t().contiguous(),
                              name=(name + ".indices") if name else None,
                              process_set=process_set)
    values = allgather_async(tensor._values().contiguous(),
                             name=(name + ".values") if name else None,
                             process_set=process_set)
    shape = tensor.size()

    def handle():
        val = synchronize(values)
        idx = synchronize(indices)
        if op == Average:
            val = val / process_set.size()
        return torch.sparse_coo_tensor(idx.t(), val, shape,
                                       check_invariants=False)
    return handle


# -- allgather ---------------------------------------------------------------

def allgather_async(tensor, name=None, process_set=global_process_set):
    return _enqueue(_OP.allgather, _inputs([tensor], _OP.allgather,
                                           "allgather", name, process_set),
                    "allgather", name, _first_engine_tensor,
                    process_set=process_set)


class HorovodAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.process_set = process_set
        handle = allgather_async(tensor, name, process_set)
        ctx.dim0 = tensor.shape[0] if tensor.dim() else 0
        return synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        ps = ctx.process_set
        grad = synchronize(allreduce_async(grad_output, op=Average,
                                           process_set=ps))
        dim0s = synchronize(allgather_async(
            torch.tensor([ctx.dim0], dtype=torch.int64), process_set=ps))
        return _rows_of_this_rank(grad, dim0s, ps), None, None


def _rows_of_this_rank(grad, dim0s, process_set):
    """This rank's slice of a gradient of allgather's output: upstream
    averages that gradient over the set, then each rank keeps its rows."""
    me = process_set.rank()
    return grad.narrow(0, int(dim0s[:me].sum()), int(dim0s[me]))


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's tensor along dim 0 (differentiable)."""
    return _apply(HorovodAllgather, tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    inputs = _inputs(list(tensors), _OP.allgather, "grouped_allgather", name,
                     process_set)
    return _enqueue(_OP.allgather, inputs, "grouped_allgather", name,
                    _engine_tensors, process_set=process_set)


class HorovodGroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.process_set = process_set
        handle = grouped_allgather_async(tensors, name, process_set)
        ctx.dim0s = [t.shape[0] if t.dim() else 0 for t in tensors]
        return tuple(synchronize(handle))

    @staticmethod
    def backward(ctx, *grads):
        ps = ctx.process_set
        reduced = synchronize(grouped_allreduce_async(list(grads), op=Average,
                                                      process_set=ps))
        dim0s = synchronize(allgather_async(
            torch.tensor([ctx.dim0s], dtype=torch.int64), process_set=ps))
        return (None, None) + tuple(
            _rows_of_this_rank(g, dim0s[:, i], ps)
            for i, g in enumerate(reduced))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor, negotiated as one unit (differentiable)."""
    return list(_apply(HorovodGroupedAllgather, name, process_set, *tensors))


# -- broadcast ---------------------------------------------------------------

def broadcast_async_(tensor, root_rank, name=None,
                     process_set=global_process_set):
    works, finish = _read(lambda: _inplace_targets([tensor]), [tensor],
                          _OP.broadcast, "broadcast", name, process_set)
    return _enqueue(_OP.broadcast, works, "broadcast", name,
                    lambda c: finish(c)[0], root=root_rank,
                    process_set=process_set)


def broadcast_async(tensor, root_rank, name=None,
                    process_set=global_process_set):
    output = _read(lambda: _broadcast_output(tensor, root_rank), [tensor],
                   _OP.broadcast, "broadcast", name, process_set)
    return broadcast_async_(output, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class HorovodBroadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        # Upstream: the gradient averaged over the set, kept by the root.
        grad = synchronize(allreduce_async(grad_output, op=Average,
                                           process_set=ctx.process_set))
        if rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's tensor on every rank (differentiable)."""
    return _apply(HorovodBroadcast, tensor, root_rank, name, process_set)


# -- alltoall ----------------------------------------------------------------

def alltoall_async(tensor, splits=None, name=None,
                   process_set=global_process_set):
    def finish(chs):
        received = torch.tensor(list(chs[0].received_splits),
                                dtype=torch.int32)
        return _engine_tensor(chs[0]), received
    inputs, counts = _read(lambda: ([_input(tensor)], _split_counts(splits)),
                           [tensor], _OP.alltoall, "alltoall", name,
                           process_set)
    return _enqueue(_OP.alltoall, inputs, "alltoall", name, finish,
                    splits=counts, process_set=process_set)


class HorovodAlltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        out, received = synchronize(alltoall_async(tensor, splits, name,
                                                   process_set))
        ctx.received = received
        ctx.process_set = process_set
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad_output, _):
        grad, _ = synchronize(alltoall_async(grad_output, ctx.received,
                                             process_set=ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[i] rows of `tensor` to rank i. Returns the received rows
    and, when `splits` is given, the received splits (differentiable)."""
    out, received = _apply(HorovodAlltoall, tensor, splits, name, process_set)
    if splits is None:
        return out
    return out, received


# -- reducescatter -----------------------------------------------------------

def reducescatter_async(tensor, name=None, op=Average,
                        process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    inputs = _inputs([tensor], _OP.reducescatter, "reducescatter", name,
                     process_set)
    return _enqueue(
        _OP.reducescatter, inputs, "reducescatter", name,
        _first_engine_tensor, Average if op is None else op, prescale_factor,
        postscale_factor, process_set=process_set)


def _reducescatter_grads(grads, op, process_set, scale):
    """Upstream's gradient of reducescatter: each rank's output gradient
    gathered back to full shape, times the set size for Sum; the scale
    factors apply as in the forward pass."""
    gathered = synchronize(grouped_allgather_async(grads,
                                                   process_set=process_set))
    if op == Sum:
        scale *= process_set.size()
    return [g * scale if scale != 1.0 else g for g in gathered]


class HorovodReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, pre, post):
        ctx.args = (op, process_set, pre * post)
        return synchronize(reducescatter_async(tensor, name, op, process_set,
                                               pre, post))

    @staticmethod
    def backward(ctx, grad_output):
        op, ps, scale = ctx.args
        grad, = _reducescatter_grads([grad_output], op, ps, scale)
        return grad, None, None, None, None, None


def reducescatter(tensor, name=None, compression=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces `tensor` over all ranks and returns this rank's share of dim 0
    (the first dim0 % size ranks get one extra row; differentiable)."""
    compression = checked_compression(compression, Compression.none)
    compressed, ctx = compression.compress(tensor)
    out = _apply(HorovodReducescatter, compressed, name,
                 Average if op is None else op, process_set, prescale_factor,
                 postscale_factor)
    return compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    inputs = _inputs(list(tensors), _OP.reducescatter,
                     "grouped_reducescatter", name, process_set)
    return _enqueue(
        _OP.reducescatter, inputs, "grouped_reducescatter", name,
        _engine_tensors,
        Average if op is None else op, prescale_factor, postscale_factor,
        process_set=process_set)


class HorovodGroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, pre, post, *tensors):
        ctx.args = (op, process_set, pre * post)
        return tuple(synchronize(grouped_reducescatter_async(
            tensors, name, op, process_set, pre, post)))

    @staticmethod
    def backward(ctx, *grads):
        op, ps, scale = ctx.args
        return (None,) * 5 + tuple(_reducescatter_grads(list(grads), op, ps,
                                                        scale))


def grouped_reducescatter(tensors, name=None, compression=None, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of each tensor, negotiated as one unit
    (differentiable)."""
    compression = checked_compression(compression, Compression.none)
    pairs = [compression.compress(t) for t in tensors]
    outs = _apply(
        HorovodGroupedReducescatter, name, Average if op is None else op,
        process_set, prescale_factor, postscale_factor,
        *[c for c, _ in pairs])
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]


# -- barrier and join --------------------------------------------------------

def barrier(process_set=global_process_set):
    """Blocks until every rank of the set has called barrier."""
    _collectives.barrier(process_set)


def join(device=-1):
    """Declares this rank out of data: until every rank has joined, it takes
    part in other ranks' allreduces with zeros. Returns the last rank to
    join."""
    return _collectives.join()
