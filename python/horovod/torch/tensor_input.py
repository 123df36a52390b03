"""What the engine reads of torch tensors, made before their operation is
enqueued: contiguous, detached views (copies where a tensor is strided),
exported as DLPack; and, for input torch cannot hand over, a clear error
refused to the operation's peers too (read), so they fail with the reason
instead of waiting for this rank.

Thread-safety: the functions may be called from any thread.
"""

import numbers

import torch

from horovod.common import ops as _ops
from horovod.common.exceptions import HorovodInvalidArgumentError
from horovod.common.topology import rank

_collectives = _ops.process_collectives()

# torch's own DLPack export, which skips the checks of ``Tensor.__dlpack__``
# (microseconds a call).
to_dlpack = torch.utils.dlpack.to_dlpack


def unreadable(tensor, error):
    """The clear error for a `tensor` torch could not hand to the engine
    (`error`: what torch raised), or `error` itself where the tensor is one
    the engine reads."""
    if not isinstance(tensor, torch.Tensor):
        return TypeError("horovod.torch collectives take torch tensors, got "
                         "%s (rank %d)" % (type(tensor).__name__, rank()))
    if tensor.is_nested or tensor.layout is not torch.strided:
        nested = tensor.is_nested
        return HorovodInvalidArgumentError(
            "horovod.torch collectives take dense tensors, got a %s tensor "
            "(rank %d)%s" % (
                "nested" if nested else str(tensor.layout)[6:], rank(),
                "" if nested else "; a sparse gradient is reduced by "
                "hvd.sparse_allreduce_async, or densely by "
                "DistributedOptimizer(sparse_as_dense=True)"))
    if tensor.is_quantized:
        return _ops.unsupported_dtype(str(tensor.dtype)[6:], rank())
    if tensor.is_meta:
        return HorovodInvalidArgumentError(
            "a tensor on the meta device has no data to send (rank %d)"
            % rank())
    return error


def read(prepare, tensors, op, prefix, name, process_set):
    """prepare(): what the engine reads of `tensors` (a list), made before
    their operation is enqueued; a failure raises refused's error."""
    try:
        return prepare()
    except Exception as e:
        raise refused(e, tensors, op, prefix, name, process_set) from None


def refused(error, tensors, op, prefix, name, process_set):
    """For `error`, raised while the engine's view of `tensors` (a list) was
    made, before their operation was enqueued: the operation is refused to
    its peers (Collectives.refuse), and the error to raise is returned, a
    clear one where torch could not hand a tensor over (unreadable)."""
    error = _ops.explained(unreadable, tensors, error)
    _collectives.refuse(op, tensors, prefix, name, process_set, error)
    return error


def engine_input(tensor):
    """What the engine reads: contiguous memory, detached from autograd."""
    return tensor.detach().contiguous()


def inplace_targets(tensors):
    """Contiguous tensors for the engine to write into, and the finish that
    copies results back into non-contiguous originals."""
    works = [t.detach() if t.is_contiguous() else t.detach().contiguous()
             for t in tensors]

    def finish(_):
        for t, w in zip(tensors, works):
            if t.data_ptr() != w.data_ptr():
                t.detach().copy_(w)
        return tensors
    return works, finish


def sources_and_outputs(tensors):
    """An out-of-place grouped allreduce's sources (compact, detached) and
    outputs."""
    sources = [t.detach() if t.is_contiguous() else t.detach().contiguous()
               for t in tensors]
    return sources, [torch.empty_like(t, memory_format=torch.contiguous_format)
                     for t in sources]


def engine_inputs(tensors, op, prefix, name, process_set):
    """What the engine reads of `tensors` (a list), as one operation's
    input: engine_input of each, through read."""
    return read(lambda: [engine_input(t) for t in tensors], tensors, op,
                prefix, name, process_set)


def broadcast_output(tensor, root_rank):
    """broadcast_async's output: written whole by the broadcast, so only the
    root's starts as a copy of the input (elsewhere a copy would be
    overwritten)."""
    source = tensor.detach()
    if rank() == root_rank:
        return source.clone(memory_format=torch.contiguous_format)
    return torch.empty_like(source, memory_format=torch.contiguous_format)


def split_counts(splits):
    """alltoall's splits (None, a tensor or a sequence) as a list of
    ints."""
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        if splits.dtype.is_floating_point or splits.dtype.is_complex or \
                splits.dtype == torch.bool:
            raise ValueError("alltoall splits must be a tensor of integers, "
                             "got %s (rank %d)" % (splits.dtype, rank()))
        return splits.tolist()
    counts = list(splits)
    for s in counts:
        if not isinstance(s, numbers.Integral) or isinstance(s, bool):
            raise ValueError("alltoall splits must be integers, got %r "
                             "(rank %d)" % (s, rank()))
    return counts
