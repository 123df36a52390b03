"""SyncBatchNorm on N ranks matches BatchNorm on the concatenated batch:
outputs, input gradients, summed weight gradients and running stats."""

import torch

import horovod.torch as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
torch.manual_seed(3)
C = 5
full = torch.randn(n * 4, C, 3, 3, dtype=torch.float64)
gout = torch.randn(n * 4, C, 3, 3, dtype=torch.float64)

ref = torch.nn.BatchNorm2d(C).double()
with torch.no_grad():
    ref.weight.uniform_(0.5, 1.5)
    ref.bias.uniform_(-0.5, 0.5)
sync = hvd.SyncBatchNorm(C).double()
sync.load_state_dict(ref.state_dict())

x_ref = full.clone().requires_grad_()
y_ref = ref(x_ref)
y_ref.backward(gout)

x = full[r * 4:(r + 1) * 4].clone().requires_grad_()
y = sync(x)
y.backward(gout[r * 4:(r + 1) * 4])

torch.testing.assert_close(y, y_ref[r * 4:(r + 1) * 4])
torch.testing.assert_close(x.grad, x_ref.grad[r * 4:(r + 1) * 4])
wg = hvd.allreduce(sync.weight.grad, op=hvd.Sum)
bg = hvd.allreduce(sync.bias.grad, op=hvd.Sum)
torch.testing.assert_close(wg, ref.weight.grad)
torch.testing.assert_close(bg, ref.bias.grad)
torch.testing.assert_close(sync.running_mean, ref.running_mean)
torch.testing.assert_close(sync.running_var, ref.running_var)
sync.eval()
ref.eval()
torch.testing.assert_close(sync(full), ref(full))
print("sync_bn OK on rank %d" % r)
hvd.shutdown()
