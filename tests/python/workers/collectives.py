"""Every collective, dtype and reduction op, checked against values each
rank can compute locally."""

import math
import sys

import torch

import horovod.torch as hvd
from common import ALL_DTYPES, close

hvd.init()
r, n = hvd.rank(), hvd.size()
ranks = list(range(n))


def expected_reduce(vals, op, dtype):
    if dtype == torch.bool:
        return any(vals) if op in (hvd.Sum, hvd.Max) else all(vals)
    if op == hvd.Sum:
        return sum(vals)
    if op == hvd.Average:
        s = sum(vals) / n
        return math.trunc(s) if not dtype.is_floating_point else s
    if op == hvd.Min:
        return min(vals)
    if op == hvd.Max:
        return max(vals)
    return math.prod(vals)


# allreduce: every dtype x op
for dtype in ALL_DTYPES:
    ops = [hvd.Sum, hvd.Min, hvd.Max, hvd.Product]
    if dtype != torch.bool:
        ops.append(hvd.Average)
    for op in ops:
        if dtype == torch.bool:
            mine, vals = (r % 2 == 0), [k % 2 == 0 for k in ranks]
        else:
            mine, vals = r + 1, [k + 1 for k in ranks]
        x = torch.full((17, 3), mine, dtype=dtype)
        y = hvd.allreduce(x, op=op, name="ar.%s.%d" % (dtype, op))
        want = torch.full((17, 3), expected_reduce(vals, op, dtype), dtype=dtype)
        close(y, want, tol=1e-2)
        close(x, torch.full((17, 3), mine, dtype=dtype))  # input untouched

# in place, large (ring path), non-contiguous, scalar, empty
big = torch.arange(1_000_003, dtype=torch.float64) * (r + 1)
hvd.allreduce_(big, op=hvd.Sum)
close(big, torch.arange(1_000_003, dtype=torch.float64) * sum(k + 1 for k in ranks))
base = torch.ones(6, 4) * (r + 1)
nc = base[:, ::2]
assert not nc.is_contiguous()
hvd.allreduce_(nc, op=hvd.Sum)
close(nc, torch.full((6, 2), float(sum(k + 1 for k in ranks))))
close(base[:, 1::2], torch.full((6, 2), float(r + 1)))
close(hvd.allreduce(torch.tensor(float(r)), op=hvd.Max), torch.tensor(float(n - 1)))
close(hvd.allreduce(torch.zeros(0, 5)), torch.zeros(0, 5))

# prescale / postscale
y = hvd.allreduce(torch.full((4,), float(r + 1)), op=hvd.Sum,
                  prescale_factor=2.0, postscale_factor=0.25)
close(y, torch.full((4,), 2.0 * 0.25 * sum(k + 1 for k in ranks)))

# out-of-order submission: ranks enqueue the same names in different orders
names = ["ooo.%d" % i for i in range(6)]
order = names if r % 2 == 0 else list(reversed(names))
handles = {nm: hvd.allreduce_async(torch.full((3,), float(i + r)), name=nm,
                                   op=hvd.Sum)
           for nm, i in zip(order, [names.index(x) for x in order])}
for nm in names:
    i = names.index(nm)
    close(hvd.synchronize(handles[nm]), torch.full((3,), float(n * i + sum(ranks))))

# async + poll
h = hvd.allreduce_async_(torch.ones(8), name="polled")
while not hvd.poll(h):
    pass
close(hvd.synchronize(h), torch.ones(8))

# grouped
outs = hvd.grouped_allreduce([torch.full((2,), float(r)), torch.full((3, 1), 1.0)],
                             op=hvd.Sum, name="grp")
close(outs[0], torch.full((2,), float(sum(ranks))))
close(outs[1], torch.full((3, 1), float(n)))
ts = [torch.full((5,), float(r)), torch.ones(2, dtype=torch.float64)]
hvd.grouped_allreduce_(ts, op=hvd.Max)
close(ts[0], torch.full((5,), float(n - 1)))

# allgather with uneven dim 0, including a rank with 0 rows, every dtype
for dtype in ALL_DTYPES:
    x = torch.full((r, 3), r % 2 if dtype == torch.bool else r, dtype=dtype)
    y = hvd.allgather(x, name="ag.%s" % dtype)
    want = torch.cat([torch.full((k, 3), k % 2 if dtype == torch.bool else k,
                                 dtype=dtype) for k in ranks])
    close(y, want)
g = hvd.grouped_allgather([torch.full((1,), float(r)), torch.full((2, 2), r)])
close(g[0], torch.tensor([float(k) for k in ranks]))
assert g[1].shape == (2 * n, 2)

# broadcast, every dtype, from the last rank
root = n - 1
for dtype in ALL_DTYPES:
    x = torch.full((7,), (r % 2) if dtype == torch.bool else r + 1, dtype=dtype)
    y = hvd.broadcast(x, root, name="bc.%s" % dtype)
    close(y, torch.full((7,), (root % 2) if dtype == torch.bool else root + 1,
                        dtype=dtype))
x = torch.full((3,), float(r))
hvd.broadcast_(x, 0)
close(x, torch.zeros(3))

# alltoall with splits (rank d gets d+1 rows) and without
rows = sum(d + 1 for d in ranks)
x = torch.cat([torch.full((d + 1, 2), 100 * r + d, dtype=torch.int32) for d in ranks])
y, recv = hvd.alltoall(x, splits=[d + 1 for d in ranks])
close(y, torch.cat([torch.full((r + 1, 2), 100 * s + r, dtype=torch.int32)
                    for s in ranks]))
assert recv.tolist() == [r + 1] * n, recv
y = hvd.alltoall(torch.arange(2 * n, dtype=torch.float32) + 10 * r)
close(y, torch.cat([torch.tensor([2.0 * r, 2.0 * r + 1]) + 10 * s for s in ranks]))

# reducescatter: uneven dim 0 (first dim0 % n ranks get one more row)
dim0 = 2 * n + 1
x = torch.arange(dim0 * 2, dtype=torch.float32).reshape(dim0, 2) * (r + 1)
y = hvd.reducescatter(x, op=hvd.Sum)
counts = [dim0 // n + (1 if k < dim0 % n else 0) for k in ranks]
start = sum(counts[:r])
full = torch.arange(dim0 * 2, dtype=torch.float32).reshape(dim0, 2) * sum(k + 1 for k in ranks)
close(y, full[start:start + counts[r]])
y = hvd.reducescatter(x)  # Average
close(y, full[start:start + counts[r]] / n)
gy = hvd.grouped_reducescatter([x, x * 2], op=hvd.Sum)
close(gy[1], 2 * full[start:start + counts[r]])

# autograd
x = torch.ones(4, requires_grad=True)
hvd.allreduce(x, op=hvd.Sum).sum().backward()
close(x.grad, torch.full((4,), float(n)))
x = torch.ones(r + 1, 2, requires_grad=True)
w = torch.arange(sum(k + 1 for k in ranks) * 2, dtype=torch.float32).reshape(-1, 2)
(hvd.allgather(x) * w).sum().backward()
off = sum(k + 1 for k in range(r))
close(x.grad, n * w[off:off + r + 1])
x = torch.ones(3, requires_grad=True)
hvd.broadcast(x, 0).sum().backward()
close(x.grad, torch.full((3,), float(n) if r == 0 else 0.0))

x = torch.ones(2 * n, 3, requires_grad=True)
y = hvd.alltoall(x)
(y * (r + 1)).sum().backward()  # rows sent to rank d come back scaled by d+1
close(x.grad, torch.cat([torch.full((2, 3), float(d + 1)) for d in ranks]))
x = torch.ones(n + 1, 2, requires_grad=True)
hvd.reducescatter(x, op=hvd.Sum).sum().backward()
close(x.grad, torch.ones(n + 1, 2))

# sparse allreduce: indices and values gathered, summed
sp = torch.sparse_coo_tensor(torch.tensor([[r, n]]), torch.tensor([1.0, 2.0]), (n + 1,))
h = hvd.sparse_allreduce_async(sp, name="sparse", op=hvd.Sum)
dense = hvd.synchronize(h).to_dense()
close(dense, torch.tensor([1.0] * n + [2.0 * n]))

# objects
obj = hvd.broadcast_object({"rank": r, "list": [1, 2]} if r == 0 else None, 0)
assert obj == {"rank": 0, "list": [1, 2]}, obj
assert hvd.allgather_object(("r", r)) == [("r", k) for k in ranks]

hvd.barrier()
print("collectives OK on rank %d" % r)
hvd.shutdown()
