"""horovod.torch under torch.compile: collectives called from a compiled
function run as they run eagerly (Dynamo leaves Horovod's Python to run
as it is, a graph break around each call), and a compiled train step with
DistributedOptimizer trains as the eager one does."""

import warnings

import torch

import horovod.torch as hvd
from common import close

hvd.init()
r, n = hvd.rank(), hvd.size()
ranks = torch.arange(n, dtype=torch.float32)


def compiled(fn):
    # The eager backend: what is checked is Dynamo's tracing, which every
    # backend shares, without the minutes Inductor spends compiling.
    return torch.compile(fn, backend="eager")


def check_collectives_called_from_compiled_functions():
    x = torch.ones(3) * (r + 1)
    total = float(sum(k + 1 for k in range(n)))
    with warnings.catch_warnings():
        # Dynamo warns when it reaches a C function it cannot trace: it
        # must not reach Horovod's.
        warnings.filterwarnings("error", "Dynamo does not know how to trace")
        close(compiled(lambda t: hvd.allreduce(t * 2, op=hvd.Sum))(x),
              torch.full((3,), 2 * total))
        close(compiled(lambda t: hvd.allreduce(t, name="named"))(x),
              torch.full((3,), total / n))
        close(compiled(lambda t: hvd.allreduce_(t.clone(), op=hvd.Sum))(x),
              torch.full((3,), total))
        a, b = compiled(lambda t: hvd.grouped_allreduce(
            [t, t * 3], op=hvd.Sum))(x)
        close(a, torch.full((3,), total))
        close(b, torch.full((3,), 3 * total))
        close(compiled(lambda t: hvd.allgather(t[:1]))(x), ranks + 1)
        close(compiled(lambda t: hvd.broadcast_(t.clone(), n - 1))(x),
              torch.full((3,), float(n)))
        close(compiled(lambda t: hvd.reducescatter(
            t.repeat(n), op=hvd.Sum))(x), torch.full((3,), total))
        close(compiled(lambda t: hvd.alltoall(t.repeat(n)))(x),
              (ranks + 1).repeat_interleave(3))
        out, received = compiled(lambda t: hvd.alltoall(
            t.repeat(n), torch.full((n,), 3)))(x)
        close(out, (ranks + 1).repeat_interleave(3))
        close(received, torch.full((n,), 3, dtype=torch.int32))
    # allreduce_async_ and synchronize are C functions themselves, which
    # Dynamo calls as they are (warning that it cannot trace them).
    close(compiled(lambda t: hvd.synchronize(hvd.allreduce_async_(
        t.clone(), name="async", op=hvd.Sum)))(x), torch.full((3,), total))
    # Called again (Dynamo's cached graphs): the numbering of unnamed
    # collectives still agrees across ranks.
    f = compiled(lambda t: hvd.allreduce(t, op=hvd.Sum) + hvd.allreduce(t))
    for _ in range(3):
        close(f(x), torch.full((3,), total + total / n))


def _train(step_fn, steps=4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(),
                                torch.nn.Linear(8, 1))
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1),
        named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    losses = []

    def step(xb, yb):
        opt.zero_grad()
        loss = ((model(xb) - yb) ** 2).mean()
        loss.backward()
        opt.step()
        return hvd.allreduce(loss.detach(), name="loss")

    run = step_fn(step)
    gen = torch.Generator().manual_seed(r)
    for _ in range(steps):
        losses.append(run(torch.randn(5, 6, generator=gen),
                          torch.randn(5, 1, generator=gen)))
    return model, torch.stack(losses)


def check_compiled_train_step_trains_as_the_eager_one():
    eager_model, eager_losses = _train(lambda f: f)
    model, losses = _train(compiled)
    close(losses, eager_losses)
    for p, q in zip(model.parameters(), eager_model.parameters()):
        close(p, q)
        # The same on every rank: the gradients were averaged.
        close(hvd.allgather(p.detach()[None]), p.detach()[None].repeat(
            n, *([1] * p.dim())))
