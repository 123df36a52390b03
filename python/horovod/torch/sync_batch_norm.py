"""SyncBatchNorm: batch normalization whose statistics cover the whole
global batch (every rank of the process set), not just the local one."""

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from horovod.common.process_sets import global_process_set
from horovod.torch.mpi_ops import Sum, allreduce_, size


class SyncBatchNorm(_BatchNorm):
    """Applies batch normalization over the global batch. Works for inputs
    of any rank >= 2 (N, C, ...)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine,
                         track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)"
                             .format(input.dim()))

    def forward(self, input):
        self._check_input_dim(input)
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
        momentum = self.momentum
        if momentum is None:
            momentum = 1.0 / float(self.num_batches_tracked)
        if not self.training or self.process_set.size() == 1:
            use_batch = self.training or not self.track_running_stats
            return F.batch_norm(input, self.running_mean, self.running_var,
                                self.weight, self.bias, use_batch, momentum,
                                self.eps)
        return _SyncBatchNormFn.apply(input, self.weight, self.bias,
                                      self.running_mean, self.running_var,
                                      self.eps, momentum, self.process_set)


class _SyncBatchNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps,
                momentum, process_set):
        c = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        cdt = torch.float64 if x.dtype == torch.float64 else torch.float32
        ctx.cdt = cdt
        xf = x.to(cdt)
        count = torch.tensor([float(x.numel() // c)], dtype=torch.float64)
        stats = torch.cat([xf.sum(dims).double(), (xf * xf).sum(dims).double(),
                           count])
        allreduce_(stats, op=Sum, name=None, process_set=process_set)
        n = stats[-1]
        mean = stats[:c] / n
        var = stats[c:2 * c] / n - mean * mean
        var = var.clamp_min(0)
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(momentum * mean.to(running_mean.dtype))
                unbiased = var * n / (n - 1) if n > 1 else var
                running_var.mul_(1 - momentum).add_(momentum * unbiased.to(running_var.dtype))
        shape = [1, c] + [1] * (x.dim() - 2)
        mean_f = mean.to(cdt).view(shape)
        invstd_f = invstd.to(cdt).view(shape)
        xhat = (xf - mean_f) * invstd_f
        out = xhat
        if weight is not None:
            out = out * weight.to(cdt).view(shape) + bias.to(cdt).view(shape)
        ctx.save_for_backward(xhat, invstd_f, weight)
        ctx.n = float(n)
        ctx.dims = dims
        ctx.process_set = process_set
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        xhat, invstd, weight = ctx.saved_tensors
        g = grad_out.to(ctx.cdt)
        c = g.shape[1]
        shape = [1, c] + [1] * (g.dim() - 2)
        sum_dy = g.sum(ctx.dims)
        sum_dy_xhat = (g * xhat).sum(ctx.dims)
        grad_weight = sum_dy_xhat.to(weight.dtype) if weight is not None else None
        grad_bias = sum_dy.to(weight.dtype) if weight is not None else None
        both = torch.cat([sum_dy, sum_dy_xhat]).double()
        allreduce_(both, op=Sum, process_set=ctx.process_set)
        mean_dy = (both[:c] / ctx.n).to(ctx.cdt).view(shape)
        mean_dy_xhat = (both[c:] / ctx.n).to(ctx.cdt).view(shape)
        scale = invstd if weight is None else invstd * weight.to(ctx.cdt).view(shape)
        grad_in = (g - mean_dy - xhat * mean_dy_xhat) * scale
        return (grad_in.to(grad_out.dtype), grad_weight, grad_bias,
                None, None, None, None, None)
