"""A small job that any launcher can start: checks topology and a few ops."""

import os

import torch

import horovod.torch as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
expect = int(os.environ.get("EXPECT_SIZE", "1"))
assert n == expect, (n, expect)
assert 0 <= hvd.local_rank() < hvd.local_size()
y = hvd.allreduce(torch.full((3,), float(r + 1)), op=hvd.Sum)
assert y.tolist() == [n * (n + 1) / 2] * 3, y
g = hvd.allgather(torch.tensor([r]))
assert g.tolist() == list(range(n)), g
print("basic OK rank=%d size=%d local_rank=%d" % (r, n, hvd.local_rank()))
hvd.shutdown()
