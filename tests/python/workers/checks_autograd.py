"""Gradients of the differentiable collectives, in their plain, grouped and
process-set forms, as upstream defines them: allgather's and broadcast's
backward pass averages the output gradient over the set; reducescatter's
gathers it back, times the set size for Sum; allreduce's reduces it the way
the forward pass did. Each rank scales its loss by (rank + 1), so an
averaged gradient and a summed one differ."""

import torch

import horovod.torch as hvd
from common import close

hvd.init()
r, n = hvd.rank(), hvd.size()
ps01 = hvd.add_process_set([0, 1])
mean_scale = (n + 1) / 2.0  # mean over ranks of (rank + 1)


def _sets():
    """(process set, its members) for every form a member can run."""
    out = [(hvd.global_process_set, list(range(n)))]
    if r in (0, 1):
        out.append((ps01, [0, 1]))
    return out


def check_allreduce_gradient_reduces_like_forward():
    for ps, members in _sets():
        k = len(members)
        x = torch.ones(4, requires_grad=True)
        (hvd.allreduce(x, op=hvd.Sum, process_set=ps) * (r + 1)).sum().backward()
        close(x.grad, torch.full((4,), float(sum(m + 1 for m in members))))
        x = torch.ones(4, requires_grad=True)
        hvd.allreduce(x, process_set=ps).sum().backward()  # Average
        close(x.grad, torch.ones(4))
        x = torch.ones(2, requires_grad=True)
        hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=3.0,
                      process_set=ps).sum().backward()
        close(x.grad, torch.full((2,), 6.0 * k))


def check_grouped_allreduce_gradient():
    for ps, members in _sets():
        a = torch.ones(2, requires_grad=True)
        b = torch.ones(3, 1, requires_grad=True)
        outs = hvd.grouped_allreduce([a, b], op=hvd.Sum, process_set=ps)
        (outs[0].sum() + 2 * outs[1].sum()).backward()
        close(a.grad, torch.full((2,), float(len(members))))
        close(b.grad, torch.full((3, 1), 2.0 * len(members)))


def check_allgather_gradient_is_the_average_of_own_rows():
    for ps, members in _sets():
        me = members.index(r)
        x = torch.ones(me + 1, 2, requires_grad=True)
        rows = sum(m + 1 for m in range(len(members)))
        w = torch.arange(rows * 2, dtype=torch.float32).reshape(rows, 2)
        (hvd.allgather(x, process_set=ps) * w * (r + 1)).sum().backward()
        off = sum(m + 1 for m in range(me))
        scale = sum(m + 1 for m in members) / len(members)
        close(x.grad, w[off:off + me + 1] * scale)


def check_allgather_gradient_at_two_ranks_is_one():
    # The case users see first: at np=2 every rank's gradient is 1, not 2.
    x = torch.ones(r + 1, 2, requires_grad=True)
    hvd.allgather(x).sum().backward()
    close(x.grad, torch.ones(r + 1, 2))


def check_grouped_allgather_is_differentiable():
    for ps, members in _sets():
        me = members.index(r)
        a = torch.ones(me + 1, requires_grad=True)
        b = torch.ones(1, 3, requires_grad=True)
        outs = hvd.grouped_allgather([a, b], process_set=ps)
        ((outs[0].sum() + 2 * outs[1].sum()) * (r + 1)).backward()
        scale = sum(m + 1 for m in members) / len(members)
        close(a.grad, torch.full((me + 1,), scale))
        close(b.grad, torch.full((1, 3), 2 * scale))


def check_broadcast_gradient_is_averaged_and_kept_by_root():
    for ps, members in _sets():
        root = members[-1]
        x = torch.ones(3, requires_grad=True)
        (hvd.broadcast(x, root, process_set=ps) * (r + 1)).sum().backward()
        scale = sum(m + 1 for m in members) / len(members)
        close(x.grad, torch.full((3,), scale if r == root else 0.0))


def check_alltoall_gradient_routes_back():
    for ps, members in _sets():
        k = len(members)
        x = torch.ones(2 * k, 3, requires_grad=True)
        y = hvd.alltoall(x, process_set=ps)
        (y * (r + 1)).sum().backward()  # rows sent to member d come back * (d+1)
        close(x.grad, torch.cat([torch.full((2, 3), float(d + 1))
                                 for d in members]))


def check_reducescatter_gradient_sum_scales_by_set_size():
    for ps, members in _sets():
        k = len(members)
        x = torch.ones(k + 1, 2, requires_grad=True)
        hvd.reducescatter(x, op=hvd.Sum, process_set=ps).sum().backward()
        close(x.grad, torch.full((k + 1, 2), float(k)))
        x = torch.ones(k + 1, 2, requires_grad=True)
        hvd.reducescatter(x, process_set=ps).sum().backward()  # Average
        close(x.grad, torch.ones(k + 1, 2))


def check_grouped_reducescatter_is_differentiable():
    for ps, members in _sets():
        k = len(members)
        a = torch.ones(k, 2, requires_grad=True)
        b = torch.ones(2 * k, requires_grad=True)
        outs = hvd.grouped_reducescatter([a, b], op=hvd.Sum, process_set=ps)
        (outs[0].sum() + 3 * outs[1].sum()).backward()
        close(a.grad, torch.full((k, 2), float(k)))
        close(b.grad, torch.full((2 * k,), 3.0 * k))


def check_outputs_outside_autograd_record_nothing():
    """Where autograd records nothing (no input requires grad, or grad mode
    is off) each collective gives the same values, and outputs that neither
    require grad nor carry a backward function; where it records, they do."""
    k = float(n)
    for grad_input in (False, True):
        for grad_mode in (False, True):
            recorded = grad_input and grad_mode
            x = torch.ones(n, 2, requires_grad=grad_input)
            with torch.set_grad_enabled(grad_mode):
                outs = [hvd.allreduce(x, op=hvd.Sum, name="rec.ar"),
                        hvd.grouped_allreduce([x], op=hvd.Sum,
                                              name="rec.gar")[0],
                        hvd.allgather(x, name="rec.ag"),
                        hvd.grouped_allgather([x], name="rec.gag")[0],
                        hvd.broadcast(x, 0, name="rec.bc"),
                        hvd.alltoall(x, name="rec.a2a"),
                        hvd.reducescatter(x, op=hvd.Sum, name="rec.rs"),
                        hvd.grouped_reducescatter([x], op=hvd.Sum,
                                                  name="rec.grs")[0]]
            for y in outs:
                assert y.requires_grad == recorded, (grad_input, grad_mode, y)
                assert (y.grad_fn is not None) == recorded, (grad_input,
                                                             grad_mode, y)
            expected = [torch.full((n, 2), k), torch.full((n, 2), k),
                        torch.ones(n * n, 2), torch.ones(n * n, 2),
                        torch.ones(n, 2), torch.ones(n, 2),
                        torch.full((1, 2), k), torch.full((1, 2), k)]
            for y, e in zip(outs, expected):
                close(y.detach(), e)
