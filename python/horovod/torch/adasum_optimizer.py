"""The distributed optimizer for op=Adasum (see _DistributedAdasumOptimizer),
which DistributedOptimizer (horovod.torch.optimizer) returns for that op.

Thread-safety: as torch's optimizers, used by the thread that trains."""

import torch

from horovod.common.grouping import check_passes
from horovod.common.process_sets import global_process_set
from horovod.torch.mpi_ops import Adasum, allreduce_async_, synchronize
from horovod.torch.parameter_names import added_names, checked_names


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    """Adasum's delta rule (upstream's semantics for op=Adasum): every rank
    takes the wrapped optimizer's step on its own gradients, the change
    each parameter went through is combined across the ranks with
    op=Adasum, and every rank applies the combined change to the weights
    it started the step from. Adasum sees the whole update, which is what
    its scaling rule is made for, rather than the raw gradients.

    The step, the exchange and the update all happen in step(); gradients
    accumulate over backward passes as torch accumulates them."""

    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step=1, process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._process_set = process_set
        self._all_names = dict(
            (v, k) for k, v in checked_names(self.param_groups,
                                              named_parameters))
        self._params, self._names, self._frozen = [], [], []
        self._take([(p, self._all_names[p]) for g in self.param_groups
                    for p in g["params"]])
        self.backward_passes_per_step = backward_passes_per_step
        self._starts = None  # the weights a step starts from, kept

    def set_backward_passes_per_step(self, passes):
        check_passes(passes)
        self.backward_passes_per_step = passes

    def add_param_group(self, param_group):
        """torch's; the new group's weight changes are then combined as the
        others' are."""
        super(self.__class__, self).add_param_group(param_group)
        if "_params" not in self.__dict__:
            return  # torch's __init__ adding the first groups
        self._take(list(zip(self.param_groups[-1]["params"], added_names(
            self.param_groups, self._all_names))))

    def _take(self, named):
        """Combines the weight changes of these (parameter, name) pairs
        from now on; frozen ones once they are made trainable (a layer
        unfrozen for fine-tuning), which each rank would otherwise step
        on its own."""
        for p, name in named:
            if p.requires_grad:
                self._params.append(p)
                self._names.append(name)
            else:
                self._frozen.append((p, name))
        self._starts = None  # made again, one per parameter, at the step

    def synchronize(self):
        """Nothing to wait for: Adasum exchanges weight changes in step()."""

    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when "
                             "using Adasum optimizer.")

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if not self._process_set.included():
            super(self.__class__, self).step()  # outside the set: local
            return loss
        if any(p.requires_grad for p, _ in self._frozen):
            frozen, self._frozen = self._frozen, []
            self._take(frozen)
        if self._starts is None or any(s.shape != p.shape for s, p in
                                       zip(self._starts, self._params)):
            self._starts = [torch.empty_like(p) for p in self._params]
        with torch.no_grad():
            for start, p in zip(self._starts, self._params):
                start.copy_(p)
            super(self.__class__, self).step()
            pending = []
            for start, p, name in zip(self._starts, self._params,
                                      self._names):
                delta = p.sub_(start)  # p holds its change until the end
                compressed, ctx = self._compression.compress(delta)
                pending.append((allreduce_async_(
                    compressed, name=name, op=Adasum,
                    process_set=self._process_set), compressed, ctx))
            for (handle, compressed, ctx), start, p in zip(
                    pending, self._starts, self._params):
                synchronize(handle)
                if compressed is not p:
                    p.copy_(self._compression.decompress(compressed, ctx))
                p.add_(start)
        return loss
