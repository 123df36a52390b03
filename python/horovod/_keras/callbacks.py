"""Keras 3 callbacks with upstream Horovod's arguments and semantics, for
every Keras backend."""

import math
import numbers

import keras
import numpy as np

from horovod._keras import _basics, _collectives, broadcast_variables
from horovod.common.ops import Average, OpType
from horovod.common.process_sets import global_process_set


def _allreduce_numpy(values, name, process_set):
    out = np.array(values, dtype=np.float64)
    try:
        _collectives.synchronize(_collectives.enqueue(
            OpType.allreduce, [out], "allreduce", name, lambda _: None,
            reduce_op=Average, process_set=process_set))
    finally:
        _collectives.leave_census()
    return out


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Makes every rank start training from root_rank's model and optimizer
    state. The optimizer is built first, so its state (momentum buffers,
    step count) is broadcast before the first step rather than after it."""

    def __init__(self, root_rank, device="", process_set=global_process_set):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.process_set = process_set
        self.broadcast_done = False

    def on_train_begin(self, logs=None):
        if self.broadcast_done:
            return
        opt = getattr(self.model, "optimizer", None)
        variables = list(self.model.variables)
        if opt is not None:
            if not opt.built:
                opt.build(self.model.trainable_variables)
            variables += list(opt.variables)
        broadcast_variables(variables, self.root_rank, self.process_set)
        self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """Replaces each epoch's metrics in `logs` with their average over the
    ranks, so every rank logs (and later callbacks see) the same values.
    Put it before callbacks that read metrics (checkpoints, schedules)."""

    def __init__(self, device="", process_set=global_process_set):
        super().__init__()
        self.device = device
        self.process_set = process_set

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        # Every scalar number, finite or not: each rank must send the same
        # keys, and a loss gone to NaN or inf on one rank is averaged in,
        # as upstream averages it.
        keys = sorted(k for k, v in logs.items()
                      if np.ndim(v) == 0 and np.asarray(v).dtype.kind in "biuf")
        averaged = _allreduce_numpy([float(logs[k]) for k in keys],
                                    "MetricAverageCallback", self.process_set)
        for k, v in zip(keys, averaged):
            logs[k] = float(v)


def _set_lr(optimizer, lr, momentum_correction):
    """Sets the learning rate; with momentum_correction, rescales SGD's
    momentum buffers by new/old so the step after a change weighs past
    updates at the new rate (upstream scales the momentum coefficient for
    one step, which Keras 3 bakes into compiled steps; scaling the buffers
    once is the same update)."""
    old = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
    if old == lr:
        return
    optimizer.learning_rate = lr
    if momentum_correction and old > 0 and \
            getattr(optimizer, "momentum", 0) and \
            getattr(optimizer, "momentums", None):
        for m in optimizer.momentums:
            m.assign(m * (lr / old))


def _number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_schedule(initial_lr, multiplier, start_epoch, end_epoch,
                    steps_per_epoch):
    """A schedule's arguments, refused by name when the callback is made
    rather than when fit reaches them."""
    if initial_lr is None:
        raise ValueError("initial_lr must be given: Keras 3 optimizers "
                         "do not remember the learning rate they were "
                         "created with once a schedule changed it")
    if not _number(initial_lr):
        raise ValueError("initial_lr must be a number, got %r"
                         % (initial_lr,))
    if not (callable(multiplier) or _number(multiplier)):
        raise ValueError("multiplier must be a number or a function of the "
                         "epoch, got %r" % (multiplier,))
    if not _number(start_epoch) or (end_epoch is not None and (
            not _number(end_epoch) or end_epoch < start_epoch)):
        raise ValueError("the epochs must be numbers with end_epoch (None: "
                         "no end) not below start_epoch, got start_epoch=%r "
                         "and end_epoch=%r" % (start_epoch, end_epoch))
    if steps_per_epoch is not None and (
            isinstance(steps_per_epoch, bool) or
            not isinstance(steps_per_epoch, numbers.Integral) or
            steps_per_epoch < 1):
        raise ValueError("steps_per_epoch must be a positive integer, got %r"
                         % (steps_per_epoch,))


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier between start_epoch
    (inclusive) and end_epoch (exclusive). `multiplier` is a number or a
    function of the epoch; with staircase=False it is evaluated at every
    batch with a fractional epoch (epoch + batch / steps_per_epoch)."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None,
                 staircase=True, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        super().__init__()
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.verbose = verbose
        self.current_epoch = None
        _check_schedule(initial_lr, multiplier, start_epoch, end_epoch,
                        steps_per_epoch)
        if not callable(multiplier):
            self.staircase = True
            self.multiplier = lambda epoch: multiplier
        else:
            self.multiplier = multiplier

    def _active(self, epoch):
        return epoch >= self.start_epoch and (
            self.end_epoch is None or epoch < self.end_epoch)

    def _adjust(self, epoch):
        lr = self.initial_lr * self.multiplier(epoch)
        _set_lr(self.model.optimizer, lr, self.momentum_correction)
        return lr

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = (self.params or {}).get("steps")
            if not self.steps_per_epoch:
                raise ValueError(
                    "steps_per_epoch is needed for a non-staircase schedule "
                    "when Keras does not know the epoch length")

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self.staircase and self._active(epoch):
            lr = self._adjust(epoch)
            if self.verbose and _basics.rank() == 0:
                print("\nEpoch %d: LearningRateScheduleCallback set the "
                      "learning rate to %g." % (epoch + 1, lr))

    def on_train_batch_begin(self, batch, logs=None):
        if self.staircase or not self._active(self.current_epoch):
            return
        self._adjust(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = float(keras.ops.convert_to_numpy(
                self.model.optimizer.learning_rate))


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Ramps the learning rate from initial_lr / size to initial_lr over
    warmup_epochs, batch by batch (the gradual warm-up of Goyal et al.,
    "Accurate, Large Minibatch SGD")."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        if not _number(warmup_epochs) or warmup_epochs < 0:
            raise ValueError("warmup_epochs must be a number of epochs, 0 "
                             "or more, got %r" % (warmup_epochs,))
        size = _basics.size()

        def multiplier(epoch):
            # Fraction of the way through warm-up, from 1/size to 1.
            return 1.0 / size * (epoch * (size - 1) / warmup_epochs + 1)
        super().__init__(initial_lr, multiplier, start_epoch=0,
                         end_epoch=warmup_epochs, staircase=False,
                         momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch, verbose=verbose)
        self.warmup_epochs = warmup_epochs

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.warmup_epochs - 1:
            # The ramp ends exactly at initial_lr.
            _set_lr(self.model.optimizer, self.initial_lr,
                    self.momentum_correction)
            if self.verbose and _basics.rank() == 0:
                print("\nEpoch %d: finished gradual learning rate warmup to "
                      "%g." % (epoch + 1, self.initial_lr))


class BestModelCheckpoint(keras.callbacks.Callback):
    """Saves the model to `filepath` (on rank 0) whenever `monitor` improves,
    checked every epoch or every `save_freq` batches."""

    def __init__(self, monitor="val_loss", verbose=0, mode="auto",
                 save_freq="epoch", filepath=None):
        super().__init__()
        if mode not in ("auto", "min", "max"):
            raise ValueError("mode must be 'auto', 'min' or 'max', got %r"
                             % (mode,))
        if save_freq != "epoch" and not (isinstance(save_freq, int) and
                                         save_freq > 0):
            raise ValueError("save_freq must be 'epoch' or a positive number "
                             "of batches, got %r" % (save_freq,))
        self.monitor = monitor
        self.verbose = verbose
        self.save_freq = save_freq
        self.filepath = filepath
        if mode == "auto":
            mode = "max" if ("acc" in monitor or monitor.startswith("fmeasure")
                             ) else "min"
        self.mode = mode
        self.best = -math.inf if mode == "max" else math.inf
        self._batches = 0

    def on_train_begin(self, logs=None):
        if not self.filepath:
            raise ValueError("BestModelCheckpoint needs a filepath (a .keras "
                             "file) to save to")

    def _maybe_save(self, logs, when):
        value = (logs or {}).get(self.monitor)
        if value is None:
            return
        value = float(value)
        better = value > self.best if self.mode == "max" else value < self.best
        if not better:
            return
        self.best = value
        if _basics.rank() == 0:
            self.model.save(self.filepath)
            if self.verbose:
                print("\n%s: %s improved to %.5f, saved the model to %s"
                      % (when, self.monitor, value, self.filepath))

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._maybe_save(logs, "Epoch %d" % (epoch + 1))

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        self._batches += 1
        if self._batches % self.save_freq == 0:
            self._maybe_save(logs, "Batch %d" % self._batches)
