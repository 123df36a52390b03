"""horovod.torch.elastic: the state of a PyTorch training loop (model,
optimizer, samplers and plain values) that elastic training commits,
restores and syncs, a sampler that resumes an epoch where it stopped on
however many workers remain, and the retry loop `run`."""

import copy
import math
import random

import torch

from horovod.common.elastic import ObjectState, State, run
from horovod.common.exceptions import HostsUpdatedInterrupt
from horovod.torch.functions import (allgather_object, broadcast_object,
                                     broadcast_optimizer_state,
                                     broadcast_parameters)
from horovod.torch.mpi_ops import rank, size

__all__ = ["ElasticSampler", "HostsUpdatedInterrupt", "ObjectState", "State",
           "TorchState", "run"]


class ElasticSampler(torch.utils.data.Sampler):
    """Splits a dataset across the workers like DistributedSampler, and
    remembers which samples this epoch has processed, so that after the job
    re-forms (with fewer or more workers) the rest of the epoch is split
    over whoever is there, each sample once.

    `set_epoch(epoch)` starts an epoch (and its shuffle, seeded by `seed`
    plus the epoch); `record_batch(batch_idx, batch_size)` marks a batch
    done on every worker, `record_indices(indices)` these samples; `state_dict()` /
    `load_state_dict()` carry the epoch and the processed samples (TorchState
    commits them). Indices are padded, as DistributedSampler does, so every
    worker gets as many."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.num_replicas = 1
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.indices = []
        self._padded = []
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Marks batch `batch_idx` of this pass done on every worker, not
        only this one: data-parallel workers step together, so each knows
        what the others processed, and a worker that dies takes no
        progress with it."""
        start = batch_idx * batch_size
        for r in range(self.num_replicas):
            mine = self._padded[r:self.total_size:self.num_replicas]
            self.record_indices(mine[start:start + batch_size])

    def record_indices(self, indices):
        self.processed_indices.update(int(i) for i in indices)

    def get_indices(self, batch_idx, batch_size):
        start = batch_idx * batch_size
        return self.indices[start:min(start + batch_size, len(self.indices))]

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.reset()

    def state_dict(self):
        return {"epoch": self.epoch,
                "processed_indices": sorted(self.processed_indices)}

    def reset(self):
        """Splits what is left of the epoch over the current workers."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = [i for i in order
                                  if i not in self.processed_indices]
        self.num_samples = int(math.ceil(
            len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        padded = list(self.remaining_indices)
        while padded and len(padded) < self.total_size:
            padded += padded[:self.total_size - len(padded)]
        self._padded = padded
        self.indices = padded[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return self.num_samples


class _StateDictHandler:
    """Saves and restores one object through copies of its state_dict;
    subclasses say how to sync it."""

    def __init__(self, value):
        self.value = value
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)


class _ModelHandler(_StateDictHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_StateDictHandler):
    def restore(self):
        # A failed step leaves gradients in flight on the old engine.
        drop = getattr(self.value, "drop_pending", None)
        if drop is not None:
            drop()
        super().restore()

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class _SamplerHandler(_StateDictHandler):
    def sync(self):
        # Each worker recorded only its own samples: the epoch's processed
        # set is the union of everyone's, with rank 0's epoch.
        everyone = allgather_object(sorted(self.value.processed_indices),
                                    name="elastic_sampler_processed")
        state = self.value.state_dict()
        state["processed_indices"] = sorted(set().union(*everyone))
        self.value.load_state_dict(
            broadcast_object(state, root_rank=0, name="elastic_sampler_state"))


def _handler_for(value):
    if isinstance(value, torch.nn.Module):
        return _ModelHandler(value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(value)
    if isinstance(value, ElasticSampler):
        return _SamplerHandler(value)
    return None


class TorchState(ObjectState):
    """The state of a PyTorch training loop: `model` and `optimizer` (saved
    as copies of their state_dicts, synced by broadcasting rank 0's
    parameters and optimizer state), any other modules, optimizers and
    ElasticSamplers given by keyword (likewise), and plain values (as
    ObjectState). Every one is an attribute: `state.model`, `state.epoch`.
    Assigning a new model or optimizer to its attribute replaces what is
    saved and synced."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        handled = {}
        if model is not None:
            handled["model"] = model
        if optimizer is not None:
            handled["optimizer"] = optimizer
        plain = {}
        for name, value in kwargs.items():
            if _handler_for(value) is not None:
                handled[name] = value
            else:
                plain[name] = value
        object.__setattr__(self, "_handlers", {
            name: _handler_for(value) for name, value in handled.items()})
        for name, handler in self._handlers.items():
            if handler is None:
                raise ValueError(
                    "TorchState(%s=...): expected a torch.nn.Module, a "
                    "torch.optim.Optimizer or an ElasticSampler, got %s"
                    % (name, type(handled[name]).__name__))
        super().__init__(bcast_object=broadcast_object, get_rank=rank,
                         **plain)

    def __getattr__(self, name):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            return handlers[name].value
        raise AttributeError(name)

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handler = _handler_for(value)
            if handler is None or type(handler) is not type(handlers[name]):
                raise ValueError("TorchState.%s must stay a %s"
                                 % (name, type(handlers[name].value).__name__))
            handlers[name] = handler
            return
        object.__setattr__(self, name, value)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
            handler.save()
        super().sync()

    def on_reset(self):
        # The job may have another size now: samplers split what is left
        # of the epoch over it, also when the state is not synced (hosts
        # were only removed).
        for handler in self._handlers.values():
            if isinstance(handler, _SamplerHandler):
                handler.value.reset()
        super().on_reset()
