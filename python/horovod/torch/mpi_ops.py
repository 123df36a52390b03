"""Collective operations on torch tensors, with upstream Horovod's names,
signatures and defaults. Tensors cross into the engine as DLPack."""

import threading

import torch

from horovod.common.basics import HorovodBasics
from horovod.common.exceptions import HorovodInternalError
from horovod.common.process_sets import ProcessSet, global_process_set

_basics = HorovodBasics()

init = _basics.init
shutdown = _basics.shutdown
is_initialized = _basics.is_initialized
size = _basics.size
rank = _basics.rank
local_size = _basics.local_size
local_rank = _basics.local_rank
cross_size = _basics.cross_size
cross_rank = _basics.cross_rank
is_homogeneous = _basics.is_homogeneous
mpi_threads_supported = _basics.mpi_threads_supported
mpi_enabled = _basics.mpi_enabled
mpi_built = _basics.mpi_built
gloo_enabled = _basics.gloo_enabled
gloo_built = _basics.gloo_built
nccl_built = _basics.nccl_built
ddl_built = _basics.ddl_built
ccl_built = _basics.ccl_built
cuda_built = _basics.cuda_built
rocm_built = _basics.rocm_built
add_process_set = _basics.add_process_set
remove_process_set = _basics.remove_process_set
start_timeline = _basics.start_timeline
stop_timeline = _basics.stop_timeline

# Reduction ops (values match upstream).
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_OP_ALLREDUCE, _OP_ALLGATHER, _OP_BROADCAST, _OP_ALLTOALL, _OP_REDUCESCATTER = range(5)

_DTYPES = {
    torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3,
    torch.int64: 4, torch.float16: 5, torch.bfloat16: 6, torch.float32: 7,
    torch.float64: 8, torch.bool: 9,
}

_handles = {}
_handles_lock = threading.Lock()
_next_handle = [0]


def _dtype_code(tensor):
    code = _DTYPES.get(tensor.dtype)
    if code is None:
        raise ValueError("Horovod does not support tensors of dtype %s (rank %d)"
                         % (tensor.dtype, rank()))
    return code


def _op_of(average, op):
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average; pass only one.")
    if op is None:
        op = Average if average is None or average else Sum
    if op == Adasum:
        raise ValueError("op=Adasum is not supported by this engine yet; "
                         "use hvd.Average or hvd.Sum")
    if op not in (Average, Sum, Min, Max, Product):
        raise ValueError("unknown reduction op %r" % (op,))
    return op


def _ps_id(process_set):
    if not isinstance(process_set, ProcessSet):
        raise ValueError("process_set must be a horovod ProcessSet")
    if process_set.process_set_id is None:
        raise ValueError("process set %r is not registered" % process_set)
    return process_set.process_set_id


def _check_device(tensor):
    if tensor.device.type != "cpu":
        raise ValueError("this build supports CPU tensors only (got a %s "
                         "tensor on rank %d)" % (tensor.device, rank()))


def _register(core_handles, finish):
    with _handles_lock:
        h = _next_handle[0]
        _next_handle[0] += 1
        _handles[h] = (core_handles, finish)
    return h


def _enqueue(op_code, tensors, name, reduce_op=Sum, prescale=1.0,
             postscale=1.0, root=0, splits=(), process_set=global_process_set):
    engine = _basics.engine
    for t in tensors:
        _check_device(t)
        _dtype_code(t)
    return _engine_call(engine.enqueue, op_code, list(tensors), name or "",
                        int(reduce_op), float(prescale), float(postscale),
                        int(root), [int(s) for s in splits],
                        _ps_id(process_set))


def _raise_for(code, message):
    from horovod import _core
    if code == _core.STATUS_OK:
        return
    raise HorovodInternalError(message)


def poll(handle):
    """True if the operation behind `handle` has finished."""
    with _handles_lock:
        entry = _handles.get(handle)
    if entry is None:
        raise ValueError("unknown or already synchronized handle %r" % (handle,))
    return all(h.poll() for h in entry[0])


def synchronize(handle):
    """Waits for the operation behind `handle` and returns its output."""
    with _handles_lock:
        entry = _handles.pop(handle, None)
    if entry is None:
        raise ValueError("unknown or already synchronized handle %r" % (handle,))
    core_handles, finish = entry
    for h in core_handles:
        code, message = h.wait()
        _raise_for(code, message)
    return finish(core_handles)


def _output(core_handle, like):
    return torch.from_dlpack(core_handle.output_array(_dtype_code(like)))


# -- allreduce ---------------------------------------------------------------

def _contiguous_inplace(tensor):
    """A contiguous tensor to reduce into, and how to write it back."""
    if tensor.is_contiguous():
        return tensor, lambda: tensor
    work = tensor.contiguous()

    def back():
        tensor.copy_(work)
        return tensor
    return work, back


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    op = _op_of(average, op)
    work, back = _contiguous_inplace(tensor)
    hs = _enqueue(_OP_ALLREDUCE, [work], name, op, prescale_factor,
                  postscale_factor, process_set=process_set)
    return _register(hs, lambda _: back())


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    output = tensor.detach().clone(memory_format=torch.contiguous_format)
    return allreduce_async_(output, average, name, op, prescale_factor,
                            postscale_factor, process_set)


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
    if compression is None:
        from horovod.torch.compression import Compression
        compression = Compression.none
    compressed, ctx = compression.compress(tensor)
    out = HorovodAllreduce.apply(compressed, average, name, op,
                                 prescale_factor, postscale_factor, process_set)
    return compression.decompress(out, ctx)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    op = _op_of(average, op)
    pairs = [_contiguous_inplace(t) for t in tensors]
    hs = _enqueue(_OP_ALLREDUCE, [w for w, _ in pairs], name, op,
                  prescale_factor, postscale_factor, process_set=process_set)
    return _register(hs, lambda _: [b() for _, b in pairs])


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    outs = [t.detach().clone(memory_format=torch.contiguous_format)
            for t in tensors]
    return grouped_allreduce_async_(outs, average, name, op, prescale_factor,
                                    postscale_factor, process_set)


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
    if compression is None:
        from horovod.torch.compression import Compression
        compression = Compression.none
    pairs = [compression.compress(t) for t in tensors]
    outs = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor,
                                         postscale_factor, process_set,
                                         *[c for c, _ in pairs])
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Allreduce of a sparse tensor: gathers every rank's indices and values
    and sums them (divides by the set size for Average)."""
    t = tensor.coalesce()
    indices = t.indices().t().contiguous()
    values = t.values().contiguous()
    hi = allgather_async(indices, name=(name + ".indices") if name else None,
                         process_set=process_set)
    hv = allgather_async(values, name=(name + ".values") if name else None,
                         process_set=process_set)

    def finish(_):
        idx = synchronize(hi)
        val = synchronize(hv)
        if op == Average:
            val = val / process_set.size()
        return torch.sparse_coo_tensor(idx.t(), val, t.size()).coalesce()
    return _register([], finish)


# -- allgather ---------------------------------------------------------------

def _scalar_check(tensor, what):
    if tensor.dim() == 0:
        raise ValueError("%s needs a tensor of at least one dimension (rank %d)"
                         % (what, rank()))


def allgather_async(tensor, name=None, process_set=global_process_set):
    _scalar_check(tensor, "allgather")
    work = tensor.detach().contiguous()
    hs = _enqueue(_OP_ALLGATHER, [work], name, process_set=process_set)
    return _register(hs, lambda chs: _output(chs[0], work))


class HorovodAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim0 = tensor.shape[0]
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        ps = ctx.process_set
        grad = synchronize(allreduce_async(grad_output, op=Sum, process_set=ps))
        sizes = synchronize(allgather_async(
            torch.tensor([ctx.dim0], dtype=torch.int64), process_set=ps))
        me = ps.rank()
        offset = int(sizes[:me].sum())
        return grad.narrow(0, offset, ctx.dim0), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's tensor along dim 0 (differentiable)."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    works = []
    for t in tensors:
        _scalar_check(t, "allgather")
        works.append(t.detach().contiguous())
    hs = _enqueue(_OP_ALLGATHER, works, name, process_set=process_set)
    return _register(hs, lambda chs: [_output(h, w) for h, w in zip(chs, works)])


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    return synchronize(grouped_allgather_async(tensors, name, process_set))


# -- broadcast ---------------------------------------------------------------

def broadcast_async_(tensor, root_rank, name=None,
                     process_set=global_process_set):
    work, back = _contiguous_inplace(tensor)
    hs = _enqueue(_OP_BROADCAST, [work], name, root=root_rank,
                  process_set=process_set)
    return _register(hs, lambda _: back())


def broadcast_async(tensor, root_rank, name=None,
                    process_set=global_process_set):
    output = tensor.detach().clone(memory_format=torch.contiguous_format)
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
        grad = synchronize(allreduce_async(grad_output, op=Sum,
                                           process_set=ctx.process_set))
        if rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's tensor on every rank (differentiable)."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


# -- alltoall ----------------------------------------------------------------

def alltoall_async(tensor, splits=None, name=None,
                   process_set=global_process_set):
    _scalar_check(tensor, "alltoall")
    work = tensor.detach().contiguous()
    if splits is None:
        split_list = []
    else:
        if isinstance(splits, torch.Tensor):
            split_list = [int(s) for s in splits.tolist()]
        else:
            split_list = [int(s) for s in splits]
    hs = _enqueue(_OP_ALLTOALL, [work], name, splits=split_list,
                  process_set=process_set)

    def finish(chs):
        out = _output(chs[0], work)
        received = torch.tensor(list(chs[0].received_splits), dtype=torch.int32)
        return out, received
    return _register(hs, finish)


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
    and, when `splits` is given, the received splits."""
    out, received = HorovodAlltoall.apply(tensor, splits, name, process_set)
    if splits is None:
        return out
    return out, received


# -- reducescatter -----------------------------------------------------------

def _rs_op(op):
    op = Average if op is None else op
    if op == Adasum:
        raise ValueError("op=Adasum is not supported for reducescatter")
    return op


def reducescatter_async(tensor, name=None, op=Average,
                        process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    op = _rs_op(op)
    work = tensor.detach().contiguous()
    hs = _enqueue(_OP_REDUCESCATTER, [work], name, op, prescale_factor,
                  postscale_factor, process_set=process_set)
    return _register(hs, lambda chs: _output(chs[0], work))


class HorovodReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, pre, post):
        ctx.args = (op, process_set, pre, post)
        return synchronize(reducescatter_async(tensor, name, op, process_set,
                                               pre, post))

    @staticmethod
    def backward(ctx, grad_output):
        op, ps, pre, post = ctx.args
        grad = synchronize(allgather_async(grad_output.contiguous(),
                                           process_set=ps))
        if op == Average:
            grad = grad / ps.size()
        return grad * (pre * post), None, None, None, None, None


def reducescatter(tensor, name=None, compression=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces `tensor` over all ranks and returns this rank's share of dim 0
    (the first dim0 % size ranks get one extra row)."""
    if compression is None:
        from horovod.torch.compression import Compression
        compression = Compression.none
    compressed, ctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(compressed, name, _rs_op(op), process_set,
                                     prescale_factor, postscale_factor)
    return compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    op = _rs_op(op)
    works = [t.detach().contiguous() for t in tensors]
    hs = _enqueue(_OP_REDUCESCATTER, works, name, op, prescale_factor,
                  postscale_factor, process_set=process_set)
    return _register(hs, lambda chs: [_output(h, w) for h, w in zip(chs, works)])


def grouped_reducescatter(tensors, name=None, compression=None, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    return synchronize(grouped_reducescatter_async(
        tensors, name, op, process_set, prescale_factor, postscale_factor))


# -- barrier and join --------------------------------------------------------

def barrier(process_set=global_process_set):
    """Blocks until every rank of the set has called barrier."""
    _engine_call(_basics.engine.barrier, _ps_id(process_set))


def join(device=-1):
    """Declares this rank out of data: until every rank has joined, it takes
    part in other ranks' allreduces with zeros. Returns the last rank to
    join."""
    return _engine_call(_basics.engine.join)


def _engine_call(fn, *args):
    """Calls into the engine: bad arguments stay ValueError; a failed or
    shut-down engine raises HorovodInternalError, as a failed op does."""
    try:
        return fn(*args)
    except ValueError:
        raise
    except RuntimeError as e:
        raise HorovodInternalError(str(e)) from None
