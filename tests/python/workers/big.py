"""A tensor of more than 2^31 elements (uint8, 2 GiB a rank): allreduce,
broadcast and allgather with 64-bit counts and offsets end to end, checked
by sampling positions around every 2^31 boundary and at the ends."""
import torch

import horovod.torch as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
count = 2**31 + 4099
x = torch.empty(count, dtype=torch.uint8)
x.fill_(r + 1)
x[-1] = 7 * (r + 1)
hvd.allreduce_(x, op=hvd.Sum, name="big.ar")
total = sum(k + 1 for k in range(n))
samples = [0, 1, 2**31 - 1, 2**31, 2**31 + 1, count - 2]
for i in samples:
    assert x[i].item() == total, (i, x[i].item())
assert x[-1].item() == (7 * total) % 256, x[-1].item()

y = torch.full((count,), r, dtype=torch.uint8)
y[2**31] = 100 + r
hvd.broadcast_(y, root_rank=n - 1, name="big.bc")
assert y[0].item() == n - 1 and y[2**31].item() == 100 + n - 1, y[2**31]
del x, y

# allgather whose output passes 2^31 elements: each rank 2^31 / n + 1 rows
rows = 2**31 // n + 1
z = torch.full((rows,), r, dtype=torch.uint8)
z[-1] = 200 + r
g = hvd.allgather(z, name="big.ag")
assert g.numel() == rows * n
for k in range(n):
    assert g[k * rows].item() == k and g[(k + 1) * rows - 1].item() == 200 + k
print("big OK on rank %d" % r, flush=True)
