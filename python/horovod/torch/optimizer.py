"""DistributedOptimizer: wraps a torch optimizer so that each gradient is
averaged across ranks. Each parameter's allreduce starts from a
post-accumulate-grad hook as soon as its gradient is ready, overlapping
communication with the rest of backward; step() waits for the remainder.
On a host whose cores the job's compute already fills, the hooks only mark
gradients ready and step() starts them all (HOROVOD_GRADIENT_OVERLAP).
With op=Adasum the ranks combine weight changes instead
(horovod.torch.adasum_optimizer). Under torch.amp.GradScaler the overflow
check follows the averaged gradients (_scaled_step)."""

import os
import warnings
import weakref
from contextlib import contextmanager

import torch
from torch.utils.weak import WeakIdKeyDictionary

from horovod.common.compression import checked as checked_compression
from horovod.common.exceptions import HorovodInternalError
from horovod.common.grouping import (check_adasum_set, check_passes,
                                      check_predivide)
from horovod.common.process_sets import global_process_set
from horovod.torch.adasum_optimizer import _DistributedAdasumOptimizer
from horovod.torch.compression import Compression
from horovod.torch.mpi_ops import (Adasum, Average, allreduce_async_,
                                   grouped_allreduce_async_, local_size, rank,
                                   size, sparse_allreduce_async, synchronize)
from horovod.torch.parameter_names import added_names, checked_names

# A gradient whose allreduce waits for step() (see _overlaps_backward).
_DEFERRED = "deferred"

# The live DistributedOptimizer whose hook reduces each parameter's
# gradient: the last one made over it. Hooks sit on the parameters, which
# any number of optimizers made over the same model share and which
# outlast them, so who holds a parameter's hook is known per process.
_hook_owners = WeakIdKeyDictionary()


def _remove_hooks(handles):
    for handle in handles.values():
        handle.remove()


def host_is_full(local_ranks, ranks, threads, cores):
    """Whether the job's compute already keeps every core of this host busy:
    all `ranks` on this one host, `local_ranks` of them with `threads`
    compute threads each, against the `cores` this process may run on."""
    return local_ranks == ranks and local_ranks * threads >= cores


def _overlaps_backward(params):
    """Whether each gradient's allreduce starts from its hook during
    backward (HOROVOD_GRADIENT_OVERLAP=1) or waits for step(), which starts
    them all at once (0). By default (auto) they wait on a host that the
    job's CPU compute already fills: there a transfer in the background has
    no core of its own, so it slows backward by as much as it overlaps
    with it, and the ranks' shared-memory transfers, which need both sides
    running at once, spin while one of them is not."""
    setting = os.environ.get("HOROVOD_GRADIENT_OVERLAP", "auto")
    if setting not in ("auto", "0", "1"):
        raise ValueError("HOROVOD_GRADIENT_OVERLAP=%r on rank %d: expected "
                         "auto, 0 or 1" % (setting, rank()))
    if setting != "auto":
        return setting == "1"
    if any(p.device.type != "cpu" for p in params):
        return True
    return not host_is_full(local_size(), size(), torch.get_num_threads(),
                            len(os.sched_getaffinity(0)))


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step=1, op=Average,
                 gradient_predivide_factor=1.0, groups=None,
                 sparse_as_dense=False, process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._process_set = process_set
        named_parameters = checked_names(self.param_groups, named_parameters)
        all_params = [p for g in self.param_groups for p in g["params"]]
        self._parameter_names = {v: k for k, v in named_parameters}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step
                                 for _, v in sorted(named_parameters)}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self._handles = {}
        self._hook_handles = {}  # parameter: its hook, each hooked once
        self._hook_fn = None  # set when the parameters are hooked
        self._taken = set()  # hooked since by a newer optimizer
        self._frozen = []  # reduced again once they need gradients
        self._synchronized = False
        self._should_synchronize = True
        self._groups = self._make_groups(groups, all_params)
        self._group_of = {}
        for gi, g in enumerate(self._groups or []):
            for p in g:
                self._group_of[p] = gi
        self._group_ready = {}
        self._requires_update = set()
        self._overlap = _overlaps_backward(all_params)
        self._deferred = []  # parameters and group indices, in hook order
        # A rank outside the process set trains locally: its step() neither
        # sends nor waits for anything. Alone in its job it has no one to
        # send to, unless the job is elastic and others may join.
        from horovod.common.ops import process_collectives
        if self._process_set.included() and (
                size() > 1 or self._process_set is not global_process_set or
                process_collectives().basics.is_elastic()):
            self._register_hooks()

    @staticmethod
    def _make_groups(groups, all_params):
        if groups is None:
            return None
        trainable = [p for p in all_params if p.requires_grad]
        if isinstance(groups, int):
            if groups <= 0:
                raise ValueError("num_groups must be positive")
            n = len(trainable)
            per = (n + groups - 1) // groups
            return [trainable[i:i + per] for i in range(0, n, per)]
        return [list(g) for g in groups]

    def set_backward_passes_per_step(self, passes):
        check_passes(passes)
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self):
        # A parameter outlives its optimizer (a new one made over the same
        # model, for a new stage of training): the hooks hold the optimizer
        # weakly and are removed with it, so a dropped optimizer's hooks do
        # not go on reducing gradients that a new one also reduces.
        me = weakref.ref(self)

        def hook(p):
            optimizer = me()
            if optimizer is not None:
                optimizer._hook(p)
        self._hook_fn = hook
        self._hook_params([p for g in self.param_groups for p in g["params"]])
        weakref.finalize(self, _remove_hooks, self._hook_handles)

    def _hook_params(self, params):
        for p in params:
            if not p.requires_grad:  # torch hooks only what needs gradients
                self._frozen.append(p)
                continue
            self._requires_update.add(p)
            if p in self._hook_handles:
                continue
            owner = _hook_owners.get(p)
            owner = owner() if owner is not None else None
            if owner is not None:
                owner._give_up(p)
            _hook_owners[p] = weakref.ref(self)
            self._taken.discard(p)
            self._hook_handles[p] = p.register_post_accumulate_grad_hook(
                self._hook_fn)

    def _give_up(self, p):
        """A newer DistributedOptimizer made over `p` hooks it instead:
        two hooks would reduce its gradient twice, and this one's would
        fail the next backward (`computed more than
        backward_passes_per_step times`) while the newer one is used."""
        self._hook_handles.pop(p).remove()
        self._taken.add(p)

    def _take_back(self):
        """Hooks again the parameters a newer optimizer took and has
        since let go with its life. While it lives, stepping this one
        would reduce gradients whose allreduces that one started."""
        taken = [p for g in self.param_groups for p in g["params"]
                 if p in self._taken]
        for p in taken:
            owner = _hook_owners.get(p)
            if owner is not None and owner() is not None:
                raise RuntimeError(
                    "parameter %r of this DistributedOptimizer (rank %d) is "
                    "reduced by a DistributedOptimizer made over it since, "
                    "which is still alive: the last one made over a "
                    "parameter reduces its gradient. Step that one, or drop "
                    "it (del) before stepping this one" %
                    (self._parameter_names.get(p), rank()))
        self._taken.clear()
        self._requires_update.difference_update(taken)
        self._hook_params(taken)

    def _hook_unfrozen(self):
        """Frozen parameters made trainable since (a layer unfrozen for
        fine-tuning) are hooked from now on, and reduced from this step:
        synchronize starts what their hooks could not. Left out, each rank
        would train them on its own gradients."""
        thawed = [p for p in self._frozen if p.requires_grad]
        if thawed:
            self._frozen = [p for p in self._frozen if not p.requires_grad]
            self._hook_params(thawed)

    def add_param_group(self, param_group):
        """torch's; the new group's parameters are then reduced as the
        others are (left out, each rank would train them on its own
        gradients and the ranks' weights would drift apart)."""
        super(self.__class__, self).add_param_group(param_group)
        if "_parameter_names" not in self.__dict__:
            return  # torch's __init__ adding the first groups
        added = self.param_groups[-1]["params"]
        for p, name in zip(added, added_names(self.param_groups,
                                               self._parameter_names)):
            self._parameter_names.setdefault(p, name)
            self._allreduce_delay[p] = self.backward_passes_per_step
        if self._hook_fn is not None:
            self._hook_params(added)

    def _scales(self):
        if self.op == Average:
            # The engine divides by the set size for Average; split that
            # division around the sum as gradient_predivide_factor asks.
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        name = self._parameter_names.get(p)
        if p.grad.is_sparse:
            if self.sparse_as_dense:
                p.grad = p.grad.to_dense()
            else:
                # A callable, as upstream: it returns the sparse result.
                return sparse_allreduce_async(p.grad, name, self.op,
                                              self._process_set), None
        compressed, ctx = self._compression.compress(p.grad)
        pre, post = self._scales()
        handle = allreduce_async_(compressed, name=name, op=self.op,
                                  prescale_factor=pre, postscale_factor=post,
                                  process_set=self._process_set)
        return handle, (compressed, ctx)

    def _group_allreduce_async(self, gi):
        params = self._groups[gi]
        grads = []
        ctxs = []
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            c, ctx = self._compression.compress(p.grad)
            grads.append(c)
            ctxs.append(ctx)
        pre, post = self._scales()
        handle = grouped_allreduce_async_(
            grads, name=self._parameter_names.get(params[0]), op=self.op,
            prescale_factor=pre, postscale_factor=post,
            process_set=self._process_set)
        for i, p in enumerate(params):
            self._handles[p] = (handle if i == 0 else None, (grads[i], ctxs[i]))

    def _hook(self, p):
        if p in self._handles and self._handles[p][0] is not None:
            raise AssertionError(
                "Gradients were computed more than backward_passes_per_step "
                "times before call to step(). Increase "
                "backward_passes_per_step to accumulate gradients locally.")
        self._allreduce_delay[p] -= 1
        if self._allreduce_delay[p] > 0:
            return
        if self._groups is not None and p in self._group_of:
            gi = self._group_of[p]
            ready = self._group_ready.setdefault(gi, set())
            ready.add(p)
            if len(ready) == len(self._groups[gi]):
                if self._overlap:
                    self._group_allreduce_async(gi)
                else:
                    self._defer(gi, self._groups[gi])
            return
        if self._overlap:
            self._handles[p] = self._allreduce_grad_async(p)
        else:
            self._defer(p, [p])

    def _defer(self, item, params):
        """Marks `params` as ready; synchronize() starts their allreduce."""
        self._deferred.append(item)
        for q in params:
            self._handles[q] = (_DEFERRED, None)

    def _start_deferred(self):
        """Starts what the hooks deferred to step(), each under the name
        its hook would have started it with: ranks that decide differently
        whether to overlap (an elastic job grown from one host to two, say)
        still submit the same collectives."""
        deferred, self._deferred = self._deferred, []
        for item in deferred:
            if isinstance(item, int):
                self._group_allreduce_async(item)
            else:
                self._handles[item] = self._allreduce_grad_async(item)

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hooks
        did not fire) and writes the results into the gradients."""
        if self._taken:
            self._take_back()
        if self._frozen:
            self._hook_unfrozen()
        if not self._requires_update:
            self._synchronized = True
            return
        self._start_deferred()
        if self._groups is not None:
            for gi, g in enumerate(self._groups):
                if not all(p in self._handles for p in g):
                    self._group_allreduce_async(gi)
        for p in self._requires_update - set(self._handles):
            if p in self._group_of:
                continue
            if not p.requires_grad:
                # Frozen since it was hooked: no gradient, which torch's
                # step skips; a zero one would let momentum move it.
                self._requires_update.discard(p)
                self._frozen.append(p)
                continue
            self._handles[p] = self._allreduce_grad_async(p)
        try:
            for p, (handle, ctx) in list(self._handles.items()):
                if callable(handle):  # sparse
                    p.grad = handle()
                elif handle is not None:
                    synchronize(handle)
        except HorovodInternalError:
            self.drop_pending()
            raise
        for p, (handle, ctx) in self._handles.items():
            if ctx is None:
                continue
            compressed, cctx = ctx
            if compressed is not p.grad:
                p.grad.copy_(self._compression.decompress(compressed, cctx))
        self.drop_pending()
        self._synchronized = True

    def drop_pending(self):
        """Forgets the gradients in flight and starts counting backward
        passes afresh: the end of every synchronize, and what a failed
        step needs, since an elastic job redoes it from its last commit
        (TorchState.restore calls this)."""
        self._handles.clear()
        self._deferred.clear()
        self._group_ready.clear()
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._synchronized = False

    @contextmanager
    def skip_synchronize(self):
        """Lets step() skip the wait after an explicit synchronize()."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    # torch.amp.GradScaler.step hands such an optimizer the scale and the
    # overflow flag (grad_scale, found_inf) and calls step() itself, so the
    # skip follows gradients averaged across the ranks (see _scaled_step).
    _step_supports_amp_scaling = True

    def _scaled_step(self, closure):
        """step() under GradScaler.step. Its overflow check must see the
        averaged gradients, the same on every rank, or a rank whose own
        gradients overflowed would skip a step the others take (and read
        gradients that allreduces in flight are still writing)."""
        if self._hook_fn is not None and not self._synchronized:
            self.synchronize()  # every rank alike, so the job goes on
            self._synchronized = False
            del self.grad_scale, self.found_inf  # GradScaler will not
            raise RuntimeError(
                "GradScaler.step checked gradients not yet averaged across "
                "ranks (rank %d): call optimizer.synchronize() after "
                "backward, then scaler.unscale_(optimizer) if you clip, and "
                "`with optimizer.skip_synchronize(): scaler.step(optimizer)`"
                % rank())
        self._synchronized = False
        if self.grad_scale is not None:  # not unscaled by the user
            inverse = 1.0 / self.grad_scale.double().item()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.mul_(inverse)
        if self.found_inf.item():
            return None  # skipped on every rank: the gradients are shared
        # Handled here: the wrapped optimizer's step (not fused) refuses
        # them; GradScaler deletes them after the step.
        scale, found = self.grad_scale, self.found_inf
        self.grad_scale = self.found_inf = None
        try:
            return super(self.__class__, self).step(closure)
        finally:
            self.grad_scale, self.found_inf = scale, found

    def step(self, closure=None):
        if "found_inf" in self.__dict__:
            return self._scaled_step(closure)
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without "
                              "optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause "
                              "training slowdown. You may want to consider "
                              "using optimizer.skip_synchronize() context if "
                              "you use optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but "
                "before optimizer.step() or optimizer.synchronize(). This is "
                "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def _wrapped(optimizer):
    """Whether `optimizer` is already one DistributedOptimizer made (its
    class copies one of the wrappers' methods)."""
    inits = (_DistributedOptimizer.__init__,
             _DistributedAdasumOptimizer.__init__)
    return any(vars(c).get("__init__") in inits
               for c in type(optimizer).__mro__)


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Returns `optimizer` wrapped so that step() applies gradients averaged
    (op) across the ranks of `process_set`."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError("DistributedOptimizer wraps a torch.optim.Optimizer, "
                         "got %s" % type(optimizer).__name__)
    if _wrapped(optimizer):
        # A second wrapper would hook every parameter again, and each
        # gradient would be reduced twice.
        raise ValueError("the optimizer is already a DistributedOptimizer "
                         "(rank %d); wrap the torch optimizer once" % rank())
    compression = checked_compression(compression, Compression.none)
    check_predivide(op, gradient_predivide_factor)
    check_passes(backward_passes_per_step)
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` "
                      "and will be removed in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if groups is not None and not (isinstance(groups, int) or isinstance(groups, list)):
        raise ValueError("groups should be an int or a list of lists of "
                         "torch.nn.Parameter")
    if op == Adasum and (size() > 1 or process_set is not global_process_set):
        check_adasum_set(process_set, rank())
        cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
                   dict(_DistributedAdasumOptimizer.__dict__))
        return cls(optimizer.param_groups, named_parameters, compression,
                   backward_passes_per_step, process_set)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression,
               backward_passes_per_step, op, gradient_predivide_factor, groups,
               sparse_as_dense, process_set)
