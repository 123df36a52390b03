"""Helpers shared by the Python benchmarks."""
import torch

import horovod.torch as hvd


def max_all(value, name="bench.max"):
    """The maximum of `value` over all ranks, as every rank sees it."""
    t = torch.tensor([value], dtype=torch.float64)
    hvd.allreduce_(t, op=hvd.Max, name=name)
    return t.item()
