"""horovod.keras.elastic: elastic training for Keras 3 on any backend: the
state of a model and its optimizer (`KerasState`), callbacks that keep it
committed and current under `model.fit`, and the retry loop `run`."""

import copy

import keras
import numpy as np

from horovod.common.elastic import ObjectState, run  # noqa: F401
from horovod.common.exceptions import HostsUpdatedInterrupt  # noqa: F401
from horovod.keras import broadcast_object, broadcast_variables
from horovod.common.topology import rank

__all__ = ["CommitStateCallback", "HostsUpdatedInterrupt", "KerasState",
           "UpdateBatchStateCallback", "UpdateEpochStateCallback", "run"]


def _variables(model, optimizer):
    found = list(model.variables)
    if optimizer is not None:
        found += list(optimizer.variables)
    return found


class KerasState(ObjectState):
    """A Keras model's weights and its optimizer's variables (the model's
    own optimizer when none is given), plus plain values as ObjectState.
    Saved as NumPy copies, restored by assigning them, synced by
    broadcasting rank 0's variables. An optimizer that has not built its
    variables yet (no step taken) has none to save; they are synced once it
    has."""

    def __init__(self, model, optimizer=None, **kwargs):
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(
            model, "optimizer", None)
        self._saved_variables = []
        super().__init__(bcast_object=broadcast_object, get_rank=rank,
                         **kwargs)

    def save(self):
        # Under JAX, model.fit keeps the values outside the variables
        # mid-epoch (as Keras's own callbacks do, bring them back first).
        pending = getattr(self.model, "jax_state_sync", None)
        if pending is not None:
            pending()
        self._saved_variables = [
            (v, np.array(keras.ops.convert_to_numpy(v), copy=True))
            for v in _variables(self.model, self.optimizer)]
        super().save()

    def restore(self):
        for v, value in self._saved_variables:
            v.assign(copy.copy(value))
        super().restore()

    def sync(self):
        broadcast_variables(_variables(self.model, self.optimizer),
                            root_rank=0)
        self.save()
        super().sync()


class CommitStateCallback(keras.callbacks.Callback):
    """Commits `state` every `batches_per_commit` batches and at the end of
    every epoch. Put it after the callbacks that update the state."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()
        self.batches_remaining = self.batches_per_commit


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps `state.batch` at the number of batches done in this epoch
    (0 once it ends)."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_batch_end(self, batch, logs=None):
        self.state.batch = batch + 1

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps `state.epoch` at the next epoch to run, for
    `model.fit(initial_epoch=state.epoch)` after a reset."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = epoch + 1
