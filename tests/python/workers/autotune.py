"""Autotune worker: allreduces of several sizes (on both sides of any
small/large crossover the tuner tries), each checked, until rank 0's
autotune log shows the final choice, then a few more steps."""

import os
import time

import torch

import horovod.torch as hvd
from common import close


def step(i):
    n = hvd.size()
    tensors = [torch.full((k,), float(hvd.rank() + 1 + i % 3))
               for k in (1, 300, 5000, 70000, 300000)]
    hs = [hvd.allreduce_async_(t, op=hvd.Sum, name="tune.%d" % j)
          for j, t in enumerate(tensors)]
    expect = n * (n + 1) / 2 + n * (i % 3)
    for h, t in zip(hs, tensors):
        hvd.synchronize(h)
        close(t, torch.full_like(t, expect))


def main():
    hvd.init()
    log = os.environ["HOROVOD_AUTOTUNE_LOG"]
    deadline = time.time() + 90
    i = 0
    while True:
        step(i)
        i += 1
        settled = hvd.rank() == 0 and os.path.exists(log) and \
            ",best," in open(log).read()
        flag = hvd.broadcast(torch.tensor([int(settled)]), 0, name="settled")
        if int(flag):
            break
        if time.time() > deadline:
            raise AssertionError("autotune did not settle within 90 s")
    for j in range(5):
        step(i + j)
    print("autotune OK on rank %d after %d steps" % (hvd.rank(), i), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
