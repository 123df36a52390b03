"""DistributedOptimizer equivalence: N ranks x batch B give the same
parameters as 1 process x batch N*B (SGD with momentum, Adam), also with
backward_passes_per_step=2; broadcast_parameters/optimizer_state; and the
zero_grad guard."""

import torch

import horovod.torch as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
torch.manual_seed(0)
B, D = 4, 6
X = torch.randn(10, n * B, D, dtype=torch.float64)
Y = torch.randn(10, n * B, 1, dtype=torch.float64)


def model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(D, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 1)).double()


def train(make_opt, distributed, passes=1):
    m = model()
    if distributed:
        # Start from different weights on purpose: broadcast must fix it.
        with torch.no_grad():
            for p in m.parameters():
                p.add_(r)
    opt = make_opt(m.parameters())
    if distributed:
        opt = hvd.DistributedOptimizer(opt, named_parameters=m.named_parameters(),
                                       backward_passes_per_step=passes)
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
    return torch.cat([p.detach().flatten() for p in m.parameters()])


for name, make in [
        ("sgd", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
        ("adam", lambda ps: torch.optim.Adam(ps, lr=0.01))]:
    for passes in (1, 2):
        ref = train(make, False, passes)
        got = train(make, True, passes)
        err = (ref - got).abs().max().item()
        assert err < 1e-5, "%s passes=%d differs by %g" % (name, passes, err)

# zero_grad between backward and step is refused
m = model()
opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                               named_parameters=m.named_parameters())
m(X[0, :B]).sum().backward()
try:
    opt.zero_grad()
    raise AssertionError("zero_grad should refuse while allreduces are pending")
except AssertionError as e:
    assert "zero_grad() was called after loss.backward()" in str(e), e
opt.step()
opt.zero_grad()

# synchronize + skip_synchronize, fp16 compression, groups
m = model()
opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                               named_parameters=m.named_parameters(),
                               compression=hvd.Compression.fp16, groups=2)
m(X[0, r * B:(r + 1) * B]).sum().backward()
opt.synchronize()
with opt.skip_synchronize():
    opt.step()
print("optimizer OK on rank %d" % r)
hvd.shutdown()
