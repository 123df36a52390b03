"""The Keras 3 adapter behind horovod.keras and horovod.tensorflow.keras,
for every Keras backend (tensorflow, torch, jax).

Keras 3 sends every backend's update through BaseOptimizer.apply (the
TensorFlow trainer via apply_gradients, the torch trainer directly, the JAX
trainer inside its jitted step via stateless_apply), and apply clips the
gradients just before updating, after gradient accumulation. The
distributed optimizer reduces the gradients there, through the backend's
own adapter (horovod.tensorflow, horovod.torch or horovod.jax), as one unit
per step: so clipping sees the reduced gradients, as with upstream, and with
backward_passes_per_step > 1 (Keras's gradient accumulation) only the
accumulated gradients travel. Optimizers that hand the gradients on to
others (LossScaleOptimizer, MultiOptimizer) never reach their own clip
step: those reduce in apply, as they receive the gradients.

Thread-safety: a distributed optimizer is used by the thread that trains.
"""

import sys

import keras

from horovod.common.compression import HalfCompressor, NoneCompressor
from horovod.common.compression import checked as checked_compression
from horovod.common.exceptions import HorovodInvalidArgumentError
from horovod.common.grouping import (check_passes, check_reduction_args,
                                      group_plan)
from horovod.common.ops import Adasum, Average, process_collectives
from horovod.common.process_sets import global_process_set

_collectives = process_collectives()
_basics = _collectives.basics


def backend_name():
    return keras.backend.backend()


def backend_module():
    """The adapter for the running Keras backend's tensors."""
    name = backend_name()
    if name == "tensorflow":
        import horovod.tensorflow as hvd
    elif name == "torch":
        import horovod.torch as hvd
    elif name == "jax":
        import horovod.jax as hvd
    else:
        raise HorovodInvalidArgumentError(
            "Keras backend %r is not supported by Horovod; use tensorflow, "
            "torch or jax" % name)
    return hvd


class _KerasFP16Compressor(HalfCompressor):
    """Sends floating-point tensors as float16 (keras.ops casts)."""

    half = "float16"

    @staticmethod
    def dtype_of(tensor):
        return keras.backend.standardize_dtype(tensor.dtype)

    @staticmethod
    def is_float(dtype):
        return dtype.startswith("float")

    @staticmethod
    def cast(tensor, dtype):
        return keras.ops.cast(tensor, dtype)


class Compression:
    """Backend-neutral gradient compression."""

    none = NoneCompressor
    fp16 = _KerasFP16Compressor


class _Reducer:
    """Reduces a step's gradients across the ranks of a process set with
    the backend's adapter."""

    def __init__(self, name, compression, sparse_as_dense, op,
                 gradient_predivide_factor, groups, process_set):
        if op == Adasum:
            raise ValueError("op == Adasum is not supported yet with Keras")
        check_reduction_args(op, gradient_predivide_factor, groups)
        self.name = name
        self.compression = checked_compression(compression,
                                               Compression.none)
        self.sparse_as_dense = sparse_as_dense
        self.op = op
        self.predivide = gradient_predivide_factor
        # Average split around the sum: 1/f before, f/size after.
        self.prescale = 1.0 / gradient_predivide_factor
        self.postscale = gradient_predivide_factor
        self.groups = groups
        self.process_set = process_set
        self._tf_reducer = None

    def active(self):
        ps = self.process_set
        return ps.included() and not (ps is global_process_set and
                                      _basics.size() == 1)

    def reduce(self, grads, variables):
        if not self.active():
            return list(grads)
        backend = backend_name()
        if backend == "tensorflow":
            if self._tf_reducer is None:
                from horovod.tensorflow.gradient_reducer import \
                    GradientReducer
                self._tf_reducer = GradientReducer(
                    self.name, self.compression, self.sparse_as_dense,
                    self.op, self.predivide, self.groups, self.process_set)
            return self._tf_reducer.reduce(grads, variables)
        present = [i for i, g in enumerate(grads) if g is not None]
        if not present:
            return list(grads)
        pairs = [self.compression.compress(grads[i]) for i in present]
        # Without explicit groups, one unit for the whole step.
        plan = group_plan([variables[i] for i in present], self.groups) \
            if self.groups is not None else [list(range(len(present)))]
        reduced = [None] * len(present)
        if backend == "torch":
            import horovod.torch as hvd
            handles = [hvd.grouped_allreduce_async(
                [pairs[k][0] for k in unit], op=self.op,
                name="%s.%d" % (self.name, unit[0]),
                prescale_factor=self.prescale,
                postscale_factor=self.postscale,
                process_set=self.process_set) for unit in plan]
            for unit, h in zip(plan, handles):
                for k, t in zip(unit, hvd.synchronize(h)):
                    reduced[k] = t
        else:
            hvd = backend_module()
            for unit in plan:
                outs = hvd.grouped_allreduce(
                    [pairs[k][0] for k in unit], op=self.op,
                    name="%s.%d" % (self.name, unit[0]),
                    prescale_factor=self.prescale,
                    postscale_factor=self.postscale,
                    process_set=self.process_set)
                for k, t in zip(unit, outs):
                    reduced[k] = t
        out = list(grads)
        for k, i in enumerate(present):
            out[i] = self.compression.decompress(reduced[k], pairs[k][1])
        return out


class _DistributedOptimizer:
    """Mixed in before the wrapped optimizer's class."""

    def _hvd_setup(self, reducer, passes, average_aggregated,
                   scale_local_gradients, local=None):
        # Set past Keras's attribute tracking: a tracked list of the model's
        # variables would make them optimizer variables too (saved with the
        # optimizer, donated twice by the JAX trainer).
        for key, value in (("_hvd_reducer", reducer), ("_hvd_passes", passes),
                           ("_hvd_average_aggregated", average_aggregated),
                           ("_hvd_scale_local", scale_local_gradients),
                           ("_hvd_local", set() if local is None else local),
                           ("_hvd_variables", None),
                           ("_hvd_reduced_outside", False)):
            object.__setattr__(self, key, value)

    def register_local_var(self, var):
        """Keeps `var`'s gradient local: it is not reduced across ranks
        (divided by the set size when scale_local_gradients)."""
        self._hvd_local.add(id(var))

    # Keras's LossScaleOptimizer sets its inner optimizer's factor to None
    # when it is made around one, as compile makes one under the
    # mixed_float16 policy: through the setter, or, where TensorFlow's
    # tracking skips assigning the value the attribute holds, the getter.
    @property
    def loss_scale_factor(self):
        self._hvd_find_loss_scaler()
        return self.__dict__.get("loss_scale_factor")

    @loss_scale_factor.setter
    def loss_scale_factor(self, value):
        self.__dict__["loss_scale_factor"] = value
        self._hvd_find_loss_scaler()

    def _hvd_find_loss_scaler(self):
        if "_hvd_reducer" in self.__dict__ and not self.built and \
                not self._hvd_reduced_outside:
            outer = _loss_scaler_around(self)
            if outer is not None:
                _reduce_outside(self, outer)

    def _backend_apply_gradients(self, grads, trainable_variables):
        # Remembered for _clip_gradients, which sees the gradients only.
        object.__setattr__(self, "_hvd_variables", list(trainable_variables))
        return super()._backend_apply_gradients(grads, trainable_variables)

    def _hvd_reduce(self, grads, variables):
        """`grads` reduced across the ranks, but those of the variables
        registered local (divided by the set size if asked)."""
        grads = list(grads)
        local = [i for i, v in enumerate(variables)
                 if id(v) in self._hvd_local]
        shared = [i for i in range(len(grads)) if i not in local]
        reduced = self._hvd_reducer.reduce([grads[i] for i in shared],
                                           [variables[i] for i in shared])
        for i, g in zip(shared, reduced):
            grads[i] = g
        if self._hvd_scale_local and local and \
                self._hvd_reducer.process_set.included():
            n = self._hvd_reducer.process_set.size()
            for i in local:
                if grads[i] is not None:
                    grads[i] = grads[i] / n
        return grads

    def _clip_gradients(self, grads):
        if self._hvd_reduced_outside:
            return super()._clip_gradients(grads)
        grads = list(grads)
        variables = self._hvd_variables
        if variables is None or len(variables) != len(grads):
            variables = list(self._trainable_variables)[:len(grads)]
        if self._hvd_passes > 1 and not self._hvd_average_aggregated:
            # Keras averages the accumulated passes; upstream sums them.
            grads = [None if g is None else g * self._hvd_passes
                     for g in grads]
        return super()._clip_gradients(self._hvd_reduce(grads, variables))


class _DistributedDispatcher(_DistributedOptimizer):
    """Mixed in before an optimizer that hands its gradients on to others
    (a MultiOptimizer, a LossScaleOptimizer), whose own clipping step never
    runs: the gradients are reduced as it receives them."""

    def apply(self, grads, trainable_variables=None):
        if trainable_variables is None and not self.built:
            return super().apply(grads)  # Keras names what is missing
        variables = list(trainable_variables if trainable_variables
                         is not None else self._trainable_variables)
        return super().apply(self._hvd_reduce(grads, variables),
                             trainable_variables)


class _DistributedLossScaleOptimizer(_DistributedDispatcher):
    """Mixed in before a LossScaleOptimizer: the scaled gradients are
    reduced before the loss scale checks them for overflow, so every rank
    finds the same answer and skips or applies the same steps. Checked on
    each rank's own gradients, a rank whose gradients overflowed would skip
    the reduction that the others wait in. Its stateless_apply (JAX) goes
    to the inner optimizer's directly, not through apply."""

    def stateless_apply(self, optimizer_variables, grads,
                        trainable_variables):
        return super().stateless_apply(
            optimizer_variables,
            self._hvd_reduce(grads, list(self._trainable_variables)),
            trainable_variables)


def _loss_scaler_around(optimizer):
    """The LossScaleOptimizer being made around `optimizer`, found among
    its callers' frames (its __init__ sets the inner one's
    loss_scale_factor through Keras's __setattr__), else None."""
    frame = sys._getframe(2)
    try:
        for _ in range(5):
            if frame is None:
                return None
            outer = frame.f_locals.get("self")
            if isinstance(outer, keras.optimizers.LossScaleOptimizer) and \
                    getattr(outer, "inner_optimizer", None) is optimizer:
                return outer
            frame = frame.f_back
        return None
    finally:
        del frame


def _reduce_outside(inner, outer):
    """A LossScaleOptimizer made around a distributed optimizer (as
    compile makes one under the mixed_float16 policy) takes over its
    reduction: reduced inside, the gradients would be reduced only on the
    ranks where they did not overflow, and the others would skip the
    reduction those wait in."""
    if inner._hvd_passes > 1:
        raise ValueError(
            "a LossScaleOptimizer (made by compile under the mixed_float16 "
            "policy) cannot hold a DistributedOptimizer with "
            "backward_passes_per_step=%d (rank %d): set "
            "gradient_accumulation_steps on the Keras optimizer instead"
            % (inner._hvd_passes, _basics.rank()))
    outer.__class__ = _distributed_class(type(outer))
    outer._hvd_setup(inner._hvd_reducer, 1, False, inner._hvd_scale_local,
                     local=inner._hvd_local)
    object.__setattr__(inner, "_hvd_reduced_outside", True)


def _dispatchers():
    """The Keras optimizers that hand the gradients on to others (an older
    Keras has no MultiOptimizer)."""
    multi = getattr(keras.optimizers, "MultiOptimizer", None)
    return (keras.optimizers.LossScaleOptimizer,) + (
        (multi,) if multi is not None else ())


def _distributed_class(base):
    # Named and placed like the wrapped class, so a saved model refers to
    # the plain optimizer; load_model wraps it again.
    if issubclass(base, keras.optimizers.LossScaleOptimizer):
        mixin = _DistributedLossScaleOptimizer
    elif issubclass(base, _dispatchers()):
        mixin = _DistributedDispatcher
    else:
        mixin = _DistributedOptimizer
    cls = type(base.__name__, (mixin, base),
               {"__module__": base.__module__,
                "__qualname__": base.__qualname__, "_hvd_base": base})
    return cls


def create_distributed_optimizer(optimizer, name, compression,
                                 sparse_as_dense, gradient_predivide_factor,
                                 op, backward_passes_per_step,
                                 average_aggregated_gradients, groups,
                                 process_set, scale_local_gradients,
                                 in_place=False):
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise ValueError("DistributedOptimizer wraps a Keras optimizer, got "
                         "%s" % type(optimizer).__name__)
    check_passes(backward_passes_per_step)
    reducer = _Reducer(name or "Distributed%s" % type(optimizer).__name__,
                       compression, sparse_as_dense, op,
                       gradient_predivide_factor, groups, process_set)
    base = type(optimizer)
    if isinstance(optimizer, _DistributedOptimizer):
        base = base._hvd_base
    if backward_passes_per_step > 1 and issubclass(base, _dispatchers()):
        raise ValueError(
            "backward_passes_per_step=%d with a %s (rank %d): set "
            "gradient_accumulation_steps on the optimizers it holds instead"
            % (backward_passes_per_step, base.__name__, _basics.rank()))
    cls = _distributed_class(base)
    if in_place:
        # Keeps the optimizer's variables (a loaded model's state).
        optimizer.__class__ = cls
        wrapped = optimizer
        if backward_passes_per_step > 1:
            wrapped.gradient_accumulation_steps = backward_passes_per_step
    else:
        config = optimizer.get_config()
        if backward_passes_per_step > 1:
            config["gradient_accumulation_steps"] = backward_passes_per_step
        wrapped = cls.from_config(config)
    wrapped._hvd_setup(reducer, backward_passes_per_step,
                       average_aggregated_gradients, scale_local_gradients)
    return wrapped


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=None, **optimizer_kwargs):
    """keras.models.load_model whose model comes back with its optimizer
    (and the optimizer's saved state) wrapped in a DistributedOptimizer."""
    objects = dict(custom_objects or {})
    for opt_cls in custom_optimizers or []:
        objects[opt_cls.__name__] = opt_cls
    model = keras.models.load_model(filepath, custom_objects=objects or None)
    if getattr(model, "optimizer", None) is not None:
        kwargs = dict(name=None, compression=compression,
                      sparse_as_dense=False, gradient_predivide_factor=1.0,
                      op=Average, backward_passes_per_step=1,
                      average_aggregated_gradients=False, groups=None,
                      process_set=global_process_set,
                      scale_local_gradients=True)
        kwargs.update(optimizer_kwargs)
        create_distributed_optimizer(model.optimizer, in_place=True, **kwargs)
    return model


# -- values ------------------------------------------------------------------

def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """Overwrites each Keras variable with root_rank's value, as one unit,
    on any backend (values travel as NumPy arrays)."""
    import numpy as np
    from horovod.common.ops import OpType
    variables = list(variables)
    if not variables:
        return
    values = [np.array(keras.ops.convert_to_numpy(v), copy=True, order="C")
              for v in variables]
    try:
        _collectives.synchronize(_collectives.enqueue(
            OpType.broadcast, values, "grouped_broadcast",
            "broadcast_variables", lambda _: None, root=root_rank,
            process_set=process_set))
    finally:
        _collectives.leave_census()
    for v, x in zip(variables, values):
        v.assign(x)
