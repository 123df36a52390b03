"""Helpers built on the collectives: parameter, optimizer-state and object
broadcast, and object allgather."""

import io

import cloudpickle
import torch

from horovod.common.process_sets import global_process_set
from horovod.torch.mpi_ops import (allgather, broadcast_, broadcast_async_,
                                   rank, synchronize)


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Broadcasts a state_dict, or (name, tensor) pairs, from root_rank in
    place."""
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, list):
        items = params
        if items and not isinstance(items[0], tuple):
            items = [(str(i), p) for i, p in enumerate(items)]
    else:
        items = list(params)
    handles = []
    for name, p in items:
        if p is None:
            continue
        target = p.data if isinstance(p, torch.nn.Parameter) else p
        if not isinstance(target, torch.Tensor):
            continue
        handles.append(broadcast_async_(target, root_rank,
                                        name="broadcast.param." + str(name),
                                        process_set=process_set))
    for h in handles:
        synchronize(h)


def broadcast_optimizer_state(optimizer, root_rank,
                              process_set=global_process_set):
    """Makes every rank's optimizer state (hyper-parameters and per-parameter
    buffers) equal to root_rank's."""
    state = broadcast_object(optimizer.state_dict(), root_rank,
                             process_set=process_set)
    if rank() != root_rank:
        optimizer.load_state_dict(state)


def broadcast_object(obj, root_rank=0, name=None,
                     process_set=global_process_set):
    """Serializes obj on root_rank with cloudpickle and returns a copy of it
    on every rank. Bytes come only from a rank of this authenticated job."""
    name = name or "broadcast_object"
    if rank() == root_rank:
        buf = io.BytesIO()
        cloudpickle.dump(obj, buf)
        payload = torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        payload = None
        length = torch.tensor([0], dtype=torch.int64)
    broadcast_(length, root_rank, name=name + ".sz", process_set=process_set)
    if payload is None:
        payload = torch.zeros(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, name=name + ".t", process_set=process_set)
    if rank() == root_rank:
        return obj
    return cloudpickle.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's obj, in rank order."""
    name = name or "allgather_object"
    data = torch.frombuffer(bytearray(cloudpickle.dumps(obj)), dtype=torch.uint8)
    sizes = allgather(torch.tensor([data.numel()], dtype=torch.int64),
                      name=name + ".sz", process_set=process_set)
    gathered = allgather(data, name=name + ".t", process_set=process_set).numpy()
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(cloudpickle.loads(gathered[offset:offset + n].tobytes()))
        offset += n
    return out
