"""DistributedOptimizer and the optimizer helpers (run by checks.py, one
pytest case per check). Equivalence: N ranks x batch B give the same
parameters as 1 process x batch N*B."""

import os
import time
import warnings

import torch

import horovod.torch as hvd
from expect import raises
from horovod.torch.optimizer import host_is_full

hvd.init()
r, n = hvd.rank(), hvd.size()
ps01 = hvd.add_process_set([0, 1])
torch.manual_seed(0)
B, D = 4, 6
X = torch.randn(10, n * B, D, dtype=torch.float64)
Y = torch.randn(10, n * B, 1, dtype=torch.float64)


def model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(D, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 1)).double()


def params(m):
    return torch.cat([p.detach().flatten() for p in m.parameters()])


def train(make_opt, distributed, passes=1, **kwargs):
    m = model()
    if distributed:
        # Start from different weights on purpose: broadcast must fix it.
        with torch.no_grad():
            for p in m.parameters():
                p.add_(r)
    opt = make_opt(m.parameters())
    if distributed:
        opt = hvd.DistributedOptimizer(opt, named_parameters=m.named_parameters(),
                                       backward_passes_per_step=passes, **kwargs)
        hvd.broadcast_parameters(m.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
    for step in range(10):
        opt.zero_grad()
        if distributed:
            xs, ys = X[step, r * B:(r + 1) * B], Y[step, r * B:(r + 1) * B]
        else:
            xs, ys = X[step], Y[step]
        chunks = list(zip(xs.chunk(passes), ys.chunk(passes)))
        for cx, cy in chunks:
            # Mean over the global batch: local mean / passes, averaged over
            # ranks by the optimizer.
            loss = torch.nn.functional.mse_loss(m(cx), cy) / len(chunks)
            loss.backward()
        opt.step()
    return params(m)


def _equivalent(make, passes=1, tol=1e-5, **kwargs):
    ref = train(make, False, passes)
    got = train(make, True, passes, **kwargs)
    err = (ref - got).abs().max().item()
    assert err < tol, "differs from single-process training by %g" % err


def sgd(ps):
    return torch.optim.SGD(ps, lr=0.1, momentum=0.9)


def adam(ps):
    return torch.optim.Adam(ps, lr=0.01)


def check_sgd_momentum_matches_single_process():
    _equivalent(sgd)


def check_adam_matches_single_process():
    _equivalent(adam)


def check_backward_passes_per_step_accumulates_locally():
    _equivalent(sgd, passes=2)
    _equivalent(adam, passes=2)


def check_groups_match_single_process():
    _equivalent(sgd, groups=2)
    m = model()
    _equivalent(sgd, groups=[list(m.parameters())[:2]])  # foreign params: ignored


def check_gradient_predivide_factor_matches_single_process():
    _equivalent(sgd, gradient_predivide_factor=2.0)


def check_fp16_compression_close_to_single_process():
    _equivalent(sgd, tol=1e-2, compression=hvd.Compression.fp16)


def check_zero_grad_between_backward_and_step_is_refused():
    m = model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters())
    m(X[0, :B]).sum().backward()
    try:
        opt.zero_grad()
        raise RuntimeError("zero_grad should refuse while allreduces are pending")
    except AssertionError as e:
        assert "zero_grad() was called after loss.backward()" in str(e), e
    opt.step()
    opt.zero_grad()


def check_synchronize_then_skip_synchronize_averages_once():
    m = model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters())
    hvd.broadcast_parameters(m.state_dict(), root_rank=0)
    before = params(m)
    # This rank's own gradients, taken without the optimizer's hooks: once
    # backward() has run, p.grad is being averaged in place and may already
    # hold the result.
    local = torch.autograd.grad(m(X[0, r * B:(r + 1) * B]).sum() * (r + 1),
                                list(m.parameters()))
    (m(X[0, r * B:(r + 1) * B]).sum() * (r + 1)).backward()
    opt.synchronize()
    # Every rank now holds the average of the ranks' gradients.
    for p, g in zip(m.parameters(), local):
        avg = hvd.allreduce(g, op=hvd.Average)
        assert torch.allclose(p.grad, avg), (p.grad, avg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "step() after synchronize()" warning
        with opt.skip_synchronize():
            opt.step()
    grads = torch.cat([p.grad.flatten() for p in m.parameters()])
    close_all(params(m), before - 0.1 * grads)
    # Without skip_synchronize the misuse is pointed out.
    (m(X[0, r * B:(r + 1) * B]).sum()).backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        opt.step()
    assert any("skip_synchronize" in str(x.message) for x in w), w


def close_all(a, b, tol=1e-9):
    assert torch.allclose(a, b, atol=tol), (a - b).abs().max()


def check_sparse_embedding_trains_with_sparse_adam():
    def make(distributed):
        torch.manual_seed(3)
        emb = torch.nn.Embedding(10, 3, sparse=True).double()
        opt = torch.optim.SparseAdam(emb.parameters(), lr=0.1)
        if distributed:
            opt = hvd.DistributedOptimizer(opt, named_parameters=emb.named_parameters())
        return emb, opt
    ids = torch.tensor([[k, 5, (k + 2) % 10] for k in range(n)])
    emb, opt = make(True)
    ref, ref_opt = make(False)
    for _ in range(3):
        opt.zero_grad()
        emb(ids[r]).sum().backward()
        opt.step()
        assert emb.weight.grad.is_sparse, "the gradient arrived dense"
        ref_opt.zero_grad()
        (ref(ids).sum() / n).backward()  # the average of the ranks' losses
        ref_opt.step()
    close_all(emb.weight.detach(), ref.weight.detach(), tol=1e-6)


def check_sparse_as_dense():
    emb = torch.nn.Embedding(10, 3, sparse=True)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=0.1),
                                   named_parameters=emb.named_parameters(),
                                   sparse_as_dense=True)
    emb(torch.tensor([r])).sum().backward()
    opt.step()
    assert not emb.weight.grad.is_sparse
    want = torch.zeros(10, 3)
    want[:n] = 1.0 / n
    close_all(emb.weight.grad, want)


class NoGrad(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor([1, 3]).int(), requires_grad=False)
        self.b = torch.nn.Parameter(torch.rand(4) + r)


def check_broadcast_optimizer_state_with_a_parameter_without_gradient():
    m = NoGrad()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(m.parameters(), lr=0.001, momentum=0.9, nesterov=True),
        named_parameters=m.named_parameters())
    hvd.broadcast_parameters(m.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["params"][0].grad is None
    grad = opt.param_groups[0]["params"][1].grad
    assert grad is not None
    assert torch.equal(hvd.broadcast(grad, root_rank=0), grad)


def check_broadcast_optimizer_state_copies_root_state_and_options():
    m = model()
    opt = torch.optim.Adam(m.parameters(), lr=0.01 * (r + 1))
    m(X[0, :B]).sum().backward()
    opt.step()
    if r != 0:
        opt.state.clear()  # also a rank with no state takes root's
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 0.01
    for p in m.parameters():
        st = opt.state[p]
        assert torch.equal(hvd.broadcast(st["exp_avg"], 0), st["exp_avg"])


def check_broadcast_optimizer_state_refuses_different_optimizers():
    # load_state_dict would take SGD's state into Adam without complaint;
    # every rank is told, and the job goes on.
    m = model()
    count = len(list(m.parameters()))
    for mine, said in (
            (torch.optim.SGD(m.parameters(), lr=0.1) if r == 0 else
             torch.optim.Adam(m.parameters()),
             "rank 0 has SGD with parameter groups of %d parameters; "
             "rank 1 has Adam" % count),
            (torch.optim.SGD(m.parameters() if r == 0 else
                             list(m.parameters())[:1], lr=0.1),
             "rank 1 has SGD with parameter groups of 1 parameters")):
        try:
            hvd.broadcast_optimizer_state(mine, root_rank=0)
        except ValueError as e:
            assert "needs the same optimizer on every rank (rank %d)" % r \
                in str(e) and said in str(e), e
        else:
            raise AssertionError("broadcast_optimizer_state took %r" % mine)
    adam = torch.optim.Adam(m.parameters(), lr=0.1 * (r + 1))
    hvd.broadcast_optimizer_state(adam, root_rank=0)
    assert adam.param_groups[0]["lr"] == 0.1


def check_broadcast_optimizer_state_refuses_lbfgs():
    m = model()
    try:
        hvd.broadcast_optimizer_state(torch.optim.LBFGS(m.parameters()), 0)
        raise RuntimeError("LBFGS state was broadcast")
    except ValueError as e:
        assert "LBFGS" in str(e)


def check_process_set_optimizer_averages_within_the_set_only():
    m = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        m.weight.fill_(1.0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=1.0),
                                   named_parameters=m.named_parameters(),
                                   process_set=ps01)
    (m(torch.ones(1, 2)) * (r + 1)).sum().backward()
    opt.step()  # a non-member steps locally and waits for nobody
    grad = 1.5 if r in (0, 1) else float(r + 1)
    close_all(m.weight.detach(), torch.full((1, 2), 1.0 - grad))


def check_a_dropped_optimizer_stops_reducing():
    # A new DistributedOptimizer over the same model (a new stage of
    # training): the one it replaces goes with its hooks, which would
    # otherwise reduce every gradient a second time and fail its next
    # backward ("computed more than backward_passes_per_step times").
    m = model()
    count = len(list(m.parameters()))
    for _ in range(2):
        opt = hvd.DistributedOptimizer(sgd(m.parameters()),
                                       named_parameters=m.named_parameters())
        for _ in range(2):
            before = hvd.metrics()["tensors"]
            opt.zero_grad()
            m(X[0, :B]).sum().backward()
            opt.step()
            assert hvd.metrics()["tensors"] - before == count, \
                hvd.metrics()["tensors"] - before


def check_a_newer_optimizer_over_the_model_takes_its_hooks():
    # Two DistributedOptimizers alive over one model (a new one loaded
    # from the state_dict of one still referenced): the newer reduces each
    # gradient once, the ranks together; the older refuses to step while
    # the newer lives (its gradients went to the newer's allreduces), and
    # steps again, hooked again, once the newer is gone.
    m = model()
    count = len(list(m.parameters()))

    def step(opt):
        before = hvd.metrics()["tensors"]
        opt.zero_grad()
        m(X[0, r * B:(r + 1) * B]).sum().backward()
        opt.step()
        return hvd.metrics()["tensors"] - before
    older = hvd.DistributedOptimizer(sgd(m.parameters()),
                                     named_parameters=m.named_parameters())
    assert step(older) == count
    newer = hvd.DistributedOptimizer(sgd(m.parameters()),
                                     named_parameters=m.named_parameters())
    newer.load_state_dict(older.state_dict())
    assert [step(newer), step(newer)] == [count, count]
    try:
        step(older)
        raise AssertionError("the older optimizer stepped")
    except RuntimeError as e:
        assert "made over it since" in str(e) and "rank %d" % r in str(e), e
    newer.synchronize()
    del newer
    assert [step(older), step(older)] == [count, count]
    close_all(hvd.broadcast(params(m), 0), params(m))


def check_grad_scaler_skips_the_same_steps_everywhere():
    # Rank 0's gradients overflow at step 1 only: after synchronize (with
    # or without unscale_ and skip_synchronize) every rank skips that step
    # and backs off alike. Stepped straight after backward, GradScaler would
    # check (and write) gradients not yet averaged: refused on every rank.
    for how in ("unscale_", "synchronize", "straight"):
        m = torch.nn.Linear(2, 1)
        start = m.weight.detach().clone()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1))
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
        for s in range(3):
            opt.zero_grad()
            loss = m(torch.ones(4, 2) * (r + 1)).sum()
            scaler.scale(loss * (float("inf") if (r, s) == (0, 1) else 1.0)
                         ).backward()
            if how == "straight":
                raises(RuntimeError, lambda: scaler.step(opt), "rank %d" % r,
                       "optimizer.synchronize() after backward")
                break
            opt.synchronize()
            if how == "unscale_":
                scaler.unscale_(opt)
            with opt.skip_synchronize():
                scaler.step(opt)
            scaler.update()
        if how != "straight":
            steps = 2 * 0.1 * 4 * sum(k + 1 for k in range(n)) / n
            close_all(m.weight.detach(), start - steps, tol=1e-6)
            assert scaler.get_scale() == 2.0 ** 15, scaler.get_scale()
    close_all(hvd.allreduce(torch.ones(1)), torch.ones(1))  # still working


def check_parameters_added_or_unfrozen_later_are_reduced_too():
    # A layer made trainable for fine-tuning, through add_param_group
    # (named or not) or by setting requires_grad on a parameter the
    # optimizer held frozen: its gradients are averaged as the others'
    # are, from that step on (left out, each rank would train it on its
    # own gradients and the ranks' weights would drift apart).
    for how in ("added", "added and named", "unfrozen"):
        a = torch.nn.Linear(2, 1, bias=False)
        b = torch.nn.Linear(2, 1, bias=False)
        for p in (a.weight, b.weight):
            torch.nn.init.ones_(p)
        names = [("a", a.weight), ("b", b.weight)] if "named" in how \
            else None
        if how == "unfrozen":
            b.weight.requires_grad_(False)
            opt = hvd.DistributedOptimizer(
                torch.optim.SGD([a.weight, b.weight], lr=1.0))
            b.weight.requires_grad_(True)
        else:
            opt = hvd.DistributedOptimizer(
                torch.optim.SGD([a.weight], lr=1.0), named_parameters=names)
            opt.add_param_group({"params": [b.weight], "lr": 1.0})
        if how == "added":
            assert opt._parameter_names[b.weight] == "allreduce.noname.1.0"
        for step in range(2):
            opt.zero_grad()
            ((a(torch.ones(1, 2)) + b(torch.ones(1, 2))) * (r + 1)).sum() \
                .backward()
            opt.step()
        want = 1.0 - 2 * sum(k + 1 for k in range(n)) / n
        for p in (a.weight, b.weight):
            close_all(p.detach(), torch.full((1, 2), want))


def check_a_layer_frozen_later_stays_put_and_thaws_again():
    # Frozen after a step, a layer keeps its weights, as in torch (no zero
    # gradient for momentum to move it by); made trainable again it is
    # reduced once a step (hooked once), the ranks together.
    a = torch.nn.Linear(2, 1, bias=False)
    b = torch.nn.Linear(2, 1, bias=False)
    for p in (a.weight, b.weight):
        torch.nn.init.ones_(p)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD([a.weight, b.weight], lr=0.1, momentum=0.9))

    def step():
        before = hvd.metrics()["tensors"]
        opt.zero_grad()
        ((a(torch.ones(1, 2)) + b(torch.ones(1, 2))) * (r + 1)).sum() \
            .backward()
        opt.step()
        return hvd.metrics()["tensors"] - before
    assert step() == 2
    b.weight.requires_grad_(False)
    kept = b.weight.detach().clone()
    assert [step(), step()] == [1, 1]
    close_all(b.weight.detach(), kept)
    assert b.weight.grad is None
    b.weight.requires_grad_(True)
    assert [step(), step()] == [2, 2]
    for p in (a.weight, b.weight):
        close_all(hvd.broadcast(p.detach(), 0), p.detach())


def check_unnamed_parameters_get_upstream_names():
    m = model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1))
    names = sorted(opt._parameter_names.values())
    assert names[0] == "allreduce.noname.0.0", names
    m(X[0, :B]).sum().backward()
    opt.step()


def _overlapping():
    setting = os.environ.get("HOROVOD_GRADIENT_OVERLAP", "auto")
    return setting == "1" or (setting == "auto" and not host_is_full(
        hvd.local_size(), n, torch.get_num_threads(),
        len(os.sched_getaffinity(0))))


def check_allreduces_start_in_backward_or_in_step_as_set():
    """HOROVOD_GRADIENT_OVERLAP=1: the hooks start each gradient's
    allreduce, so the background reduces them before step() is called;
    0: none starts before step(). auto follows the host."""
    overlap = _overlapping()
    m = model()
    count = len(list(m.parameters()))
    opt = hvd.DistributedOptimizer(sgd(m.parameters()),
                                   named_parameters=m.named_parameters())
    before = hvd.metrics()["tensors"]
    torch.nn.functional.mse_loss(m(X[0, :B]), Y[0, :B]).backward()
    # Started allreduces complete in the background within milliseconds;
    # give them far longer either way.
    deadline = time.time() + (10 if overlap else 0.5)
    while hvd.metrics()["tensors"] - before < count and \
            time.time() < deadline:
        time.sleep(0.01)
    during = hvd.metrics()["tensors"] - before
    assert during == (count if overlap else 0), (overlap, during)
    opt.step()
    assert hvd.metrics()["tensors"] - before == count


def check_passes_and_predivide_that_cannot_work_are_refused():
    m = model()
    for kw, shown in ((dict(backward_passes_per_step=0), "got 0"),
                      (dict(backward_passes_per_step=1.5), "got 1.5"),
                      (dict(gradient_predivide_factor=0.0), "must not be 0"),
                      (dict(op=17), "unknown reduce op 17; the ops are "
                       "Average (0), Sum (1), Adasum (2)"),
                      (dict(op=1.0), "unknown reduce op 1.0"),
                      (dict(compression="fp16"), "compression must be a "
                       "compressor such as Compression.none or "
                       "Compression.fp16 (with compress and decompress), "
                       "got 'fp16'")):
        try:
            hvd.DistributedOptimizer(sgd(m.parameters()),
                                     named_parameters=m.named_parameters(),
                                     **kw)
        except ValueError as e:
            assert shown in str(e), str(e)
        else:
            raise AssertionError("DistributedOptimizer took %r" % (kw,))
    try:
        hvd.DistributedOptimizer(m)
    except ValueError as e:
        assert "wraps a torch.optim.Optimizer, got Sequential" in str(e), str(e)
    else:
        raise AssertionError("DistributedOptimizer took a model")
    opt = hvd.DistributedOptimizer(sgd(m.parameters()),
                                   named_parameters=m.named_parameters())
    try:  # the collectives that take a compressor check it too
        hvd.allreduce(torch.ones(2), compression="fp16")
    except ValueError as e:
        assert "compression must be a compressor" in str(e), e
    else:
        raise AssertionError("allreduce took compression='fp16'")
    try:  # a second wrapper would reduce every gradient twice
        hvd.DistributedOptimizer(opt, named_parameters=m.named_parameters())
    except ValueError as e:
        assert "already a DistributedOptimizer (rank %d)" % r in str(e), e
    else:
        raise AssertionError("DistributedOptimizer wrapped itself")
    try:
        opt.set_backward_passes_per_step(-1)
    except ValueError as e:
        assert "got -1" in str(e), str(e)
    else:
        raise AssertionError("set_backward_passes_per_step took -1")
    assert opt.backward_passes_per_step == 1


def check_a_bad_gradient_overlap_setting_is_refused():
    os.environ["HOROVOD_GRADIENT_OVERLAP"], saved = "sometimes", \
        os.environ.get("HOROVOD_GRADIENT_OVERLAP")
    try:
        m = model()
        try:
            hvd.DistributedOptimizer(sgd(m.parameters()),
                                     named_parameters=m.named_parameters())
        except ValueError as e:
            assert "HOROVOD_GRADIENT_OVERLAP='sometimes' on rank %d" % r \
                in str(e), str(e)
        else:
            raise AssertionError("accepted HOROVOD_GRADIENT_OVERLAP=sometimes")
    finally:
        if saved is None:
            del os.environ["HOROVOD_GRADIENT_OVERLAP"]
        else:
            os.environ["HOROVOD_GRADIENT_OVERLAP"] = saved


class TwoDtypes(torch.nn.Module):
    """Many small parameters of float32 and a few of float64."""

    def __init__(self):
        super().__init__()
        self.f32 = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.randn(3)) for _ in range(300)])
        self.f64 = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.randn(2, dtype=torch.float64))
             for _ in range(3)])

    def forward(self, x):
        return sum((p * x).sum() for p in self.f32) + \
            sum((p * x).sum() for p in self.f64)


def check_gradients_of_two_dtypes_are_averaged():
    torch.manual_seed(4)
    m = TwoDtypes()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=1.0),
                                   named_parameters=m.named_parameters())
    count = len(list(m.parameters()))
    before = hvd.metrics()["tensors"]
    m(float(r + 1)).backward()
    opt.synchronize()
    assert hvd.metrics()["tensors"] - before == count
    for p in m.parameters():
        close_all(p.grad, torch.full_like(p.grad, (n + 1) / 2))
    with opt.skip_synchronize():
        opt.step()


def check_a_gradient_some_ranks_lack_is_averaged_with_zeros():
    """A branch only rank 0's forward uses: the others contribute zeros,
    and every rank steps with the same averaged gradient."""
    torch.manual_seed(2)
    trunk, branch = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
    m = torch.nn.ModuleDict({"trunk": trunk, "branch": branch})
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=1.0),
                                   named_parameters=m.named_parameters())
    x = torch.ones(1, 2)
    out = trunk(x).sum()
    if r == 0:
        out = out + branch(x).sum()
    out.backward()
    opt.synchronize()
    close_all(branch.weight.grad, torch.ones(1, 2) / n)
    close_all(branch.bias.grad, torch.ones(1) / n)
    close_all(trunk.bias.grad, torch.ones(2))
    with opt.skip_synchronize():
        opt.step()


def check_ranks_that_overlap_and_ranks_that_defer_train_together():
    """Rank 0 starts allreduces from the hooks, the others from step() (as
    when an elastic job grows from one host to two and its new ranks see a
    host with room): the same collectives match, and training equals one
    process on the whole batch."""
    saved = os.environ.get("HOROVOD_GRADIENT_OVERLAP")
    os.environ["HOROVOD_GRADIENT_OVERLAP"] = "1" if r == 0 else "0"
    try:
        _equivalent(sgd)
    finally:
        if saved is None:
            del os.environ["HOROVOD_GRADIENT_OVERLAP"]
        else:
            os.environ["HOROVOD_GRADIENT_OVERLAP"] = saved
