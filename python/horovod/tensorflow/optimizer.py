"""DistributedOptimizer for tf.compat.v1 optimizers and the session hook
that broadcasts global variables. Keras optimizers are wrapped by
horovod.tensorflow.keras instead.

With backward_passes_per_step > 1, gradients accumulate in local variables
and are reduced and applied on every backward_passes_per_step-th call only.
With op=Adasum the ranks combine the changes their steps make to the
variables instead (_DistributedAdasumOptimizer).
"""

import tensorflow as tf

from horovod.common.grouping import check_adasum_set, check_passes
from horovod.common.ops import Adasum, Average
from horovod.common.topology import rank
from horovod.common.process_sets import global_process_set
from horovod.tensorflow.functions import broadcast_global_variables
from horovod.tensorflow.gradient_reducer import (GradientReducer,
                                                 reduce_except_local, var_key)

_LegacyOptimizer = tf.compat.v1.train.Optimizer


class _DistributedOptimizer(_LegacyOptimizer):
    def __init__(self, optimizer, name, use_locking, reducer,
                 backward_passes_per_step, average_aggregated_gradients,
                 scale_local_gradients):
        super().__init__(name=name, use_locking=use_locking)
        self._optimizer = optimizer
        self._reducer = reducer
        self._passes = backward_passes_per_step
        self._average_aggregated = average_aggregated_gradients
        self._scale_local = scale_local_gradients
        self._local_vars = set()
        self._accumulators = None
        self._counter = None

    def register_local_var(self, var):
        """Keeps `var`'s gradient local: it is not reduced across ranks."""
        self._local_vars.add(var_key(var))

    def _reduce(self, grads, variables):
        return reduce_except_local(self._reducer, grads, variables,
                                   self._local_vars, self._scale_local)

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's gradients, reduced across ranks (on
        every backward_passes_per_step-th call when that is above 1)."""
        pairs = self._optimizer.compute_gradients(*args, **kwargs)
        grads = [g for g, _ in pairs]
        variables = [v for _, v in pairs]
        if self._passes == 1:
            return list(zip(self._reduce(grads, variables), variables))
        return list(zip(self._aggregate(grads, variables), variables))

    def _aggregate(self, grads, variables):
        if self._accumulators is None:
            with tf.compat.v1.variable_scope(self.get_name() + "_aggregation"):
                self._counter = tf.compat.v1.get_variable(
                    "counter", shape=[], dtype=tf.int32, trainable=False,
                    initializer=tf.zeros_initializer(),
                    collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])
                self._accumulators = [
                    None if g is None else tf.compat.v1.get_variable(
                        "acc_%d" % i, shape=v.shape, dtype=v.dtype.base_dtype,
                        trainable=False, initializer=tf.zeros_initializer(),
                        collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])
                    for i, (g, v) in enumerate(zip(grads, variables))]
        adds = [acc.assign_add(tf.convert_to_tensor(g))
                for acc, g in zip(self._accumulators, grads) if g is not None]
        with tf.control_dependencies(adds):
            count = self._counter.assign_add(1)
        self._apply_now = tf.equal(count % self._passes, 0)

        def reduced():
            total = [None if a is None else tf.identity(a)
                     for a in self._accumulators]
            if self._average_aggregated:
                total = [None if t is None else t / self._passes
                         for t in total]
            return [t for t in self._reduce(total, variables)
                    if t is not None]

        def unchanged():
            return [tf.identity(a) for a in self._accumulators
                    if a is not None]
        out = tf.cond(self._apply_now, reduced, unchanged)
        it = iter(out if isinstance(out, (list, tuple)) else [out])
        return [None if a is None else next(it) for a in self._accumulators]

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Applies through the wrapped optimizer (on reducing calls only when
        backward_passes_per_step is above 1, then clears the
        accumulators)."""
        if self._passes == 1 or self._accumulators is None:
            return self._apply(grads_and_vars, global_step, name)

        def apply():
            with tf.control_dependencies([self._apply(
                    grads_and_vars, global_step, name)]):
                return tf.group(*[a.assign(tf.zeros_like(a))
                                  for a in self._accumulators
                                  if a is not None])
        return tf.cond(self._apply_now, apply, tf.no_op)

    def _apply(self, grads_and_vars, global_step, name):
        return self._optimizer.apply_gradients(grads_and_vars, global_step,
                                               name)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


class _DistributedAdasumOptimizer(_DistributedOptimizer):
    """op=Adasum, upstream's delta rule: the gradients stay local, every rank
    applies them with the wrapped optimizer, and the change each variable
    went through is combined across the ranks with Adasum and applied to the
    value the step started from (register_local_var's variables keep their
    own change)."""

    def _reduce(self, grads, variables):
        return grads

    def _apply(self, grads_and_vars, global_step, name):
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        variables = [v for _, v in pairs]
        starts = [tf.identity(v) for v in variables]
        with tf.control_dependencies(starts):
            applied = self._optimizer.apply_gradients(grads_and_vars,
                                                      global_step, name)
        with tf.control_dependencies([applied]):
            deltas = [tf.identity(v) - s for v, s in zip(variables, starts)]
        combined = reduce_except_local(self._reducer, deltas, variables,
                                       self._local_vars, False)
        return tf.group(*[v.assign(s + d) for v, s, d in
                          zip(variables, starts, combined)])


def DistributedOptimizer(optimizer, name=None, use_locking=False,
                         device_dense="", device_sparse="", compression=None,
                         sparse_as_dense=False, backward_passes_per_step=1,
                         op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0,
                         groups=None, process_set=global_process_set,
                         scale_local_gradients=True):
    """Wraps a tf.compat.v1.train.Optimizer so that compute_gradients()
    returns gradients averaged (or `op`-reduced) across ranks. A Keras
    optimizer is handed to horovod.tensorflow.keras.DistributedOptimizer."""
    check_passes(backward_passes_per_step)
    if num_groups != 0 and groups is None:
        groups = num_groups
    if not isinstance(optimizer, _LegacyOptimizer):
        try:
            import keras
            is_keras = isinstance(optimizer, keras.optimizers.Optimizer)
        except ImportError:
            is_keras = False
        if is_keras:
            from horovod.tensorflow import keras as hvd_keras
            return hvd_keras.DistributedOptimizer(
                optimizer, name=name, compression=compression,
                sparse_as_dense=sparse_as_dense,
                backward_passes_per_step=backward_passes_per_step, op=op,
                gradient_predivide_factor=gradient_predivide_factor,
                average_aggregated_gradients=average_aggregated_gradients,
                groups=groups, process_set=process_set,
                scale_local_gradients=scale_local_gradients)
        raise ValueError(
            "DistributedOptimizer wraps a tf.compat.v1.train.Optimizer or a "
            "Keras optimizer, got %s" % type(optimizer).__name__)
    if isinstance(optimizer, _DistributedOptimizer):
        optimizer = optimizer._optimizer  # rewrapped: reduced once
    cls = _DistributedOptimizer
    if op == Adasum:
        check_adasum_set(process_set, rank())
        cls = _DistributedAdasumOptimizer
    name = name or "Distributed%s" % type(optimizer).__name__
    reducer = GradientReducer(name, compression, sparse_as_dense, op,
                              gradient_predivide_factor, groups, process_set)
    return cls(optimizer, name, use_locking, reducer, backward_passes_per_step,
               average_aggregated_gradients, scale_local_gradients)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Broadcasts every global variable from root_rank once the session is
    created, so all ranks start from the same (initial or restored)
    state."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.bcast_op = None

    def begin(self):
        graph = tf.compat.v1.get_default_graph()
        if self.bcast_op is None or self.bcast_op.graph != graph:
            self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)
