"""Helpers shared by the Python benchmarks."""
import time

import torch

import horovod.torch as hvd


def max_all(value, name="bench.max"):
    """The maximum of `value` over all ranks, as every rank sees it."""
    t = torch.tensor([value], dtype=torch.float64)
    hvd.allreduce_(t, op=hvd.Max, name=name)
    return t.item()


def timed_steps(step, steps, after=None):
    """Runs `step` `steps` times, each after a barrier (and followed by
    `after`, untimed); returns each step's time in seconds, max over ranks."""
    times = []
    for _ in range(steps):
        hvd.barrier()
        t0 = time.perf_counter()
        step()
        times.append(max_all(time.perf_counter() - t0))
        if after is not None:
            after()
    return times
