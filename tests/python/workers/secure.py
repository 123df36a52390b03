"""A rank of the attacked job (tests/python/test_security.py): starts after
SECURITY_INIT_DELAY seconds, checks a few collectives, and reports its peak
resident memory."""

import os
import time

import torch

import horovod.torch as hvd

time.sleep(float(os.environ.get("SECURITY_INIT_DELAY", "0")))
hvd.init()
r, n = hvd.rank(), hvd.size()
for i in range(20):
    y = hvd.allreduce(torch.full((1000,), float(r + i)), op=hvd.Sum,
                      name="x.%d" % i)
    assert torch.all(y == sum(range(n)) + n * i), y[:4]
g = hvd.allgather(torch.tensor([r]), name="g")
assert g.tolist() == list(range(n)), g
with open("/proc/self/status") as f:
    hwm = [l.split()[1] for l in f if l.startswith("VmHWM:")][0]
print("VmHWM_kB=%s" % hwm)
print("secure OK on rank %d" % r)
hvd.shutdown()
