"""Bad input and load: allgather where some ranks have
no rows, half precision with NaN and Inf, and many tiny tensors per step
with flat resident memory. Raises on any wrong result.

  load.py [steps] [tensors]   (defaults 50 and 10000)
"""
import math
import sys

import torch

import horovod.torch as hvd
from common import close

hvd.init()
r, n = hvd.rank(), hvd.size()
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 50
count = int(sys.argv[2]) if len(sys.argv) > 2 else 10000

# allgather: odd ranks contribute no rows
rows = 0 if r % 2 else r + 1
g = hvd.allgather(torch.full((rows, 3), float(r)), name="ag.empty_rows")
want = torch.cat([torch.full((0 if k % 2 else k + 1, 3), float(k))
                  for k in range(n)])
close(g, want)
# every rank empty
close(hvd.allgather(torch.zeros(0, 2), name="ag.all_empty"), torch.zeros(0, 2))

# half precision with NaN and Inf: IEEE sums on every rank, bit-identical
for dtype in (torch.float16, torch.bfloat16):
    x = torch.tensor([1.0, math.inf, -math.inf if r == 1 else math.inf,
                      math.nan if r == 0 else 2.0, 65504.0 if r == 0 else 1.0],
                     dtype=dtype)
    y = hvd.allreduce(x, op=hvd.Sum, name="ar.special.%s" % dtype)
    assert y[0].item() == float(n), y
    assert y[1].item() == math.inf, y
    assert math.isnan(y[2].item()) if n > 1 else y[2].item() == math.inf, y
    assert math.isnan(y[3].item()), y
    gathered = hvd.allgather(y.view(1, -1), name="ag.special.%s" % dtype)
    assert all(torch.equal(gathered[k].view(torch.int16), y.view(torch.int16))
               for k in range(n)), gathered
    m = hvd.allreduce(torch.tensor([math.nan if r == 0 else 1.0, -math.inf],
                                   dtype=dtype), op=hvd.Max,
                      name="max.special.%s" % dtype)
    assert m[1].item() == -math.inf, m


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


# many tiny tensors per step: correct every step, resident memory flat
tensors = [torch.zeros(1) for _ in range(count)]
names = ["tiny.%d" % i for i in range(count)]
baseline = None
for step in range(steps):
    for i, t in enumerate(tensors):
        t.fill_(float(r + i % 7))
    handles = [hvd.allreduce_async_(t, op=hvd.Sum, name=nm)
               for t, nm in zip(tensors, names)]
    for h in handles:
        hvd.synchronize(h)
    base = sum(range(n))
    for i in (0, 1, count // 2, count - 1):
        assert tensors[i].item() == base + n * (i % 7), (step, i, tensors[i])
    if step == 4:
        baseline = rss_bytes()  # after warm-up: caches and buffers sized
end = rss_bytes()
growth = (end - baseline) / baseline if baseline else 0.0
print("load RSS %.1f -> %.1f MiB (%+.1f%%) on rank %d"
      % (baseline / 2**20 if baseline else 0, end / 2**20, 100 * growth, r))
assert growth < 0.10, growth
print("load OK on rank %d" % r, flush=True)
