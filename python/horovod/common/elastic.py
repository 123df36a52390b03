"""Elastic training, the framework-neutral part: the state a training loop
commits and rolls back to, and the retry loop around it (`run_fn`).

A state lives on every worker. `commit()` saves a copy of it (and checks
whether the job's hosts changed); `restore()` goes back to the last copy;
`sync()` makes every worker's state equal to rank 0's. The retry loop calls
the training function; when a collective fails (`HorovodInternalError`: a
peer died) every survivor restores its last commit, the engine re-forms and
the loop syncs and calls the function again; when the hosts changed
(`HostsUpdatedInterrupt`) it re-forms without restoring.
"""

import abc
import copy
import re
import sys

from horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt


class State(abc.ABC):
    """What a training loop must be able to commit, restore and sync.
    `bcast_object(obj)` returns rank 0's obj on every rank; `get_rank()`
    returns this worker's rank."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions called, in order, each time the job has re-formed (after
        a failure or a change of hosts), before training resumes: e.g. to
        scale the learning rate to the new size."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state as the one to go back to, then raises
        HostsUpdatedInterrupt if the job's hosts changed since it formed.
        Commit at a point every worker reaches together (e.g. every few
        batches): the check is a collective when a driver runs the job."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every worker when the job's hosts
        changed since it formed (a worker is waiting to join, or one is
        gone): rank 0 asks horovodrun's elastic driver and broadcasts the
        answer, so call it where every worker is at the same step. Without
        an elastic driver the hosts never change and this returns at
        once."""
        from horovod.common.ops import process_collectives
        basics = process_collectives().basics
        if not basics.is_elastic():
            return
        answer = basics.host_updates() if self._rank() == 0 else None
        answer = self._bcast_object(answer)
        if answer and answer.get("changed"):
            raise HostsUpdatedInterrupt(answer.get("skip_sync", False))

    @abc.abstractmethod
    def save(self):
        """Keeps a copy of the current state."""

    @abc.abstractmethod
    def restore(self):
        """Returns to the last saved copy."""

    @abc.abstractmethod
    def sync(self):
        """Makes every worker's state rank 0's, and saves it."""


class ObjectState(State):
    """Named Python values (epoch, batch, anything picklable), kept as
    attributes: `state.epoch += 1`. Saved and restored as deep copies;
    synced by broadcasting rank 0's saved values."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        super().__init__(bcast_object, get_rank)
        self._saved_state = {}
        for name, value in kwargs.items():
            setattr(self, name, value)
        self._names = list(kwargs)
        self.save()

    def save(self):
        self._saved_state = {name: copy.deepcopy(getattr(self, name))
                             for name in self._names}

    def restore(self):
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self.restore()


# How XLA words a failure our collective handler reported: the status
# code's name, then the engine's message ("allreduce 'x' failed: ...").
_XLA_FAILURE = re.compile(r"^(ABORTED|INTERNAL|UNAVAILABLE|DEADLINE_EXCEEDED|"
                          r"UNKNOWN): \w+ '[^']*' failed: ")


def _failed_collective(error):
    """Whether `error` is a collective that failed in the engine: a
    HorovodInternalError, or what a framework raises when one of our kernels
    fails inside compiled code: TensorFlow's OpError from a graph (a Keras
    train step on the TensorFlow backend), JAX's runtime error from a jitted
    function."""
    if isinstance(error, HorovodInternalError):
        return True
    tf = sys.modules.get("tensorflow")
    errors = getattr(tf, "errors", None)
    if (errors is not None and isinstance(error, errors.OpError) and
            not isinstance(error, errors.InvalidArgumentError) and
            "HorovodCollective" in str(error)):
        return True
    jax = sys.modules.get("jax")
    runtime = getattr(getattr(jax, "errors", None), "JaxRuntimeError", None)
    return (runtime is not None and isinstance(error, runtime) and
            _XLA_FAILURE.match(str(error)) is not None)


def run_fn(func, reset):
    """The retry loop behind `hvd.elastic.run`: returns a function
    `wrapper(state, *args, **kwargs)` that syncs the state and calls
    `func(state, *args, **kwargs)`, and after a failure restores, re-forms
    the job with `reset()`, calls the state's reset callbacks and tries
    again. A failure inside `reset()` itself (too few workers left, the
    reset limit reached) propagates."""

    def wrapper(state, *args, **kwargs):
        if not all(callable(getattr(state, m, None))
                   for m in ("sync", "restore", "on_reset")):
            raise TypeError(
                "the first argument of a function under hvd.elastic.run is "
                "the state it syncs and restores, a State (such as "
                "hvd.elastic.TorchState); got %s" % type(state).__name__)
        skip_sync = False
        while True:
            try:
                # A peer lost during the sync is retried like one lost
                # during training.
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            except Exception as e:  # noqa: BLE001 - re-raised unless ours
                if not _failed_collective(e):
                    raise
                state.restore()
                skip_sync = False
            reset()
            state.on_reset()

    wrapper.__name__ = getattr(func, "__name__", "wrapper")
    wrapper.__doc__ = getattr(func, "__doc__", None)
    return wrapper


def _reset():
    # A fresh engine and rendezvous: the job re-forms with the workers
    # that are there.
    from horovod.common.topology import init, shutdown
    shutdown()
    init()


def run(func):
    """Decorator for the training function, called as `func(state, *args,
    **kwargs)`: syncs `state` from rank 0 first; when a collective fails
    (HorovodInternalError), every worker restores the last commit, the job
    re-forms, the state is synced again and `func` is called again; on
    HostsUpdatedInterrupt the job re-forms without restoring. Returns what
    `func` returns. Every adapter's `hvd.elastic.run` is this one."""
    return run_fn(func, _reset)
