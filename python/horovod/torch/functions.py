"""Helpers built on the collectives: parameter, optimizer-state and object
broadcast, and object allgather."""

import torch

from horovod.common import ops as _ops
from horovod.common.process_sets import global_process_set
from horovod.torch.mpi_ops import (_collectives, broadcast_async_, rank,
                                   synchronize)


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Broadcasts, in place from root_rank, a state_dict or any iterable of
    named_parameters() pairs or bare tensors (parameters(), a generator,
    included). Entries that are None are skipped; any other entry that is
    not a tensor is refused on every rank before anything is sent."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        try:
            entries = list(params)
        except TypeError:
            raise ValueError("broadcast_parameters takes a dict or an "
                             "iterable of tensors, got %s (rank %d)"
                             % (type(params).__name__, rank())) from None
        items = [p if isinstance(p, tuple) else (None, p) for p in entries]
    targets = []
    for name, p in items:
        if p is None:
            continue
        target = p.data if isinstance(p, torch.nn.Parameter) else p
        if not isinstance(target, torch.Tensor):
            raise ValueError(
                "broadcast_parameters takes tensors; %s is %s (rank %d): "
                "broadcast_object carries other values"
                % ("an entry" if name is None else repr(name), repr(p)[:80],
                   rank()))
        targets.append((name, target))
    handles = [broadcast_async_(target, root_rank, name=name,
                                process_set=process_set)
               for name, target in targets]
    for h in handles:
        synchronize(h)


def broadcast_optimizer_state(optimizer, root_rank,
                              process_set=global_process_set):
    """Makes every rank's optimizer state (hyper-parameters and per-parameter
    buffers) equal to root_rank's. As upstream, every trainable parameter
    without a gradient gets a zero one first. Unlike upstream, a new
    optimizer takes no zero-gradient step to create its state: that step
    would advance Adam's step count and apply weight decay once."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    _check_same_optimizer(optimizer, root_rank, process_set)
    sparse = isinstance(optimizer, torch.optim.SparseAdam)
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
                if sparse:
                    p.grad = p.grad.to_sparse()
    state = broadcast_object(optimizer.state_dict(), root_rank,
                             name="broadcast_optimizer_state",
                             process_set=process_set)
    if rank() != root_rank:
        optimizer.load_state_dict(state)


def _check_same_optimizer(optimizer, root_rank, process_set):
    """Raises on every rank of the set unless each has an optimizer of
    root_rank's class with as many parameters in each group: otherwise
    load_state_dict would take another class's state without complaint
    (SGD's into Adam, which then fails at its step) or fail on one rank
    only, and the ranks' states would differ."""
    mine = (type(optimizer).__name__,
            [len(g["params"]) for g in optimizer.param_groups])
    kinds = allgather_object(mine, name="broadcast_optimizer_state.kind",
                             process_set=process_set)
    ranks = process_set.ranks
    if root_rank not in ranks:
        return  # broadcast_object names the root
    root = kinds[ranks.index(root_rank)]
    differ = [(r, k) for r, k in zip(ranks, kinds) if k != root]
    if differ:
        raise ValueError(
            "broadcast_optimizer_state needs the same optimizer on every "
            "rank (rank %d): rank %d has %s; %s" % (
                rank(), root_rank, _described(root), "; ".join(
                    "rank %d has %s" % (r, _described(k))
                    for r, k in differ)))


def _described(kind):
    name, groups = kind
    return "%s with parameter groups of %s parameters" % (
        name, "/".join(str(n) for n in groups))


def broadcast_object(obj, root_rank=0, name=None,
                     process_set=global_process_set):
    """Serializes obj on root_rank with cloudpickle and returns a copy of it
    on every rank. Bytes come only from a rank of this authenticated job."""
    return _ops.broadcast_object(_collectives, obj, root_rank, name,
                                 process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's obj, in rank order."""
    return _ops.allgather_object(_collectives, obj, name, process_set)
