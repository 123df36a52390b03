"""op=Adasum from horovod.torch (run by checks.py at 2, 3 and 4 ranks, one
pytest case per check): allreduce against a NumPy reference of the
combination rule, the ranks' results bit-identical; DistributedOptimizer's
delta rule against the same reference; and, where the rank count is no
power of two or the input cannot be combined, the error on every rank."""

import numpy as np
import torch

import horovod.torch as hvd
from adasum_reference import operand, reference
from expect import raises

hvd.init()
r, n = hvd.rank(), hvd.size()
ps01 = hvd.add_process_set([0, 1])
POW2 = n & (n - 1) == 0


def same_everywhere(t):
    """The tensor is bit-identical on every rank."""
    mine = t.detach().flatten().view(torch.uint8).to(torch.int64)
    low = hvd.allreduce(mine, op=hvd.Min, name="adasum.same.min")
    high = hvd.allreduce(mine, op=hvd.Max, name="adasum.same.max")
    assert torch.equal(low, high), "ranks differ"


def check_allreduce_against_the_reference():
    if not POW2:
        raises(ValueError, lambda: hvd.allreduce(torch.ones(3), op=hvd.Adasum),
               "power-of-two", "has %d" % n, "rank %d" % r)
        return
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5),
                       (torch.float16, 2e-2), (torch.bfloat16, 5e-2)):
        for shape in ((1,), (5, 3), (1000,)):
            x = torch.tensor(operand(r, shape)).to(dtype)
            got = hvd.allreduce(x, op=hvd.Adasum, name="adasum.%s.%d" % (
                dtype, len(shape)))
            want = reference([operand(k, shape) for k in range(n)])
            assert got.dtype == dtype and got.shape == x.shape
            assert np.allclose(got.double().numpy().ravel(), want,
                               rtol=tol, atol=tol), (dtype, shape)
            same_everywhere(got)


def check_each_tensor_of_a_group_has_its_own_coefficients():
    if not POW2:
        return
    shapes = [(4,), (2, 3), (7,)]
    xs = [torch.tensor(operand(r, s, salt=i)) for i, s in enumerate(shapes)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Adasum, name="adasum.group")
    for i, (s, o) in enumerate(zip(shapes, outs)):
        want = reference([operand(k, s, salt=i) for k in range(n)])
        assert np.allclose(o.numpy().ravel(), want, rtol=1e-12, atol=1e-12)
    # In place too, and on a process set of two at any rank count.
    y = torch.tensor(operand(r, (6,)))
    hvd.allreduce_(y, op=hvd.Adasum, name="adasum.inplace")
    assert np.allclose(y.numpy().ravel(),
                       reference([operand(k, (6,)) for k in range(n)]))
    if r <= 1:
        z = hvd.allreduce(torch.tensor(operand(r, (5,))), op=hvd.Adasum,
                          name="adasum.ps01", process_set=ps01)
        assert np.allclose(z.numpy().ravel(), reference(
            [operand(0, (5,)), operand(1, (5,))]))


def check_orthogonal_vectors_add_and_equal_ones_average():
    if not POW2:
        return
    basis = torch.zeros(n, dtype=torch.float64)
    basis[r] = r + 1.0
    assert torch.equal(hvd.allreduce(basis, op=hvd.Adasum, name="adasum.o"),
                       torch.arange(1, n + 1, dtype=torch.float64))
    equal = torch.full((3,), 2.5)
    assert torch.equal(hvd.allreduce(equal, op=hvd.Adasum, name="adasum.e"),
                       equal)


def check_what_adasum_refuses():
    raises(ValueError, lambda: hvd.allreduce(
        torch.ones(2, dtype=torch.int32), op=hvd.Adasum), "int32",
        "rank %d" % r)
    raises(ValueError, lambda: hvd.reducescatter(
        torch.ones(2 * n), op=hvd.Adasum), "allreduce only", "rank %d" % r)
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [n, n]


def model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(),
                               torch.nn.Linear(3, 1)).double()


def local_step(m, rank, lr):
    """One plain SGD step on rank `rank`'s batch; returns the loss."""
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(8, 4, generator=g, dtype=torch.float64)
    y = torch.randn(8, 1, generator=g, dtype=torch.float64)
    loss = torch.nn.functional.mse_loss(m(x), y)
    loss.backward()
    return loss


def flat(m):
    return torch.cat([p.detach().flatten() for p in m.parameters()])


def check_distributed_optimizer_combines_weight_changes():
    lr = 0.1
    if not POW2:
        raises(ValueError, lambda: hvd.DistributedOptimizer(
            torch.optim.SGD(model().parameters(), lr=lr), op=hvd.Adasum),
            "power-of-two", "rank %d" % r)
        return
    # The reference: every rank's own step from the same start, its weight
    # change per parameter, combined per parameter by the tree.
    start = model()
    deltas = []
    for k in range(n):
        m = model()
        opt = torch.optim.SGD(m.parameters(), lr=lr)
        local_step(m, k, lr)
        opt.step()
        deltas.append([(p - q).detach().numpy() for p, q in
                       zip(m.parameters(), start.parameters())])
    want = np.concatenate([
        q.detach().numpy().ravel() +
        reference([deltas[k][i] for k in range(n)])
        for i, q in enumerate(start.parameters())])

    m = model()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(m.parameters(), lr=lr),
        named_parameters=m.named_parameters(), op=hvd.Adasum)
    local_step(m, r, lr)
    opt.step()
    assert np.allclose(flat(m).numpy(), want, rtol=1e-10, atol=1e-12)
    same_everywhere(flat(m))
    opt.zero_grad()
    # Further steps keep the ranks together.
    for _ in range(3):
        local_step(m, r, lr)
        opt.step()
        opt.zero_grad()
    same_everywhere(flat(m))
    try:
        opt.skip_synchronize()
        raise AssertionError("skip_synchronize accepted")
    except AssertionError as e:
        assert "not supported" in str(e), e


def check_parameters_added_or_unfrozen_later_are_combined_too():
    # The first layer frozen at first, then made trainable for fine-tuning
    # through add_param_group or requires_grad: its weight changes are
    # combined as the others' are, so the ranks stay together (left out,
    # each would keep its own step).
    if not POW2:
        return
    for how in ("added", "unfrozen"):
        m = model()
        first, last = list(m[0].parameters()), list(m[2].parameters())
        if how == "added":
            opt = hvd.DistributedOptimizer(torch.optim.SGD(last, lr=0.1),
                                           op=hvd.Adasum)
            opt.add_param_group({"params": first})
        else:
            for p in first:
                p.requires_grad_(False)
            opt = hvd.DistributedOptimizer(
                torch.optim.SGD(m.parameters(), lr=0.1), op=hvd.Adasum)
            for p in first:
                p.requires_grad_(True)
        for _ in range(2):
            opt.zero_grad()
            local_step(m, r, 0.1)
            opt.step()
        same_everywhere(flat(m))
