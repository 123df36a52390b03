"""DistributedGradientTape and PartialDistributedGradientTape: a
tf.GradientTape whose gradient() returns gradients reduced across ranks.

The wrapper is an instance of a subclass of the given tape's own class that
takes over its recorded state, so `with tf.GradientTape() as tape: ...`
followed by `tape = hvd.DistributedGradientTape(tape)` works as upstream.
"""

import tensorflow as tf

from horovod.common.ops import Average
from horovod.common.process_sets import global_process_set
from horovod.tensorflow.gradient_reducer import (GradientReducer,
                                                  reduce_except_local, var_key)


class _DistributedTape:
    """Mixed in before the wrapped tape's class."""

    def _hvd_setup(self, reducer, scale_local_gradients):
        self._hvd_reducer = reducer
        self._hvd_scale_local = scale_local_gradients
        self._hvd_local = set()

    def register_local_source(self, source):
        """Keeps `source`'s gradient local: it is not reduced across
        ranks (divided by the set size when scale_local_gradients)."""
        self._hvd_local.add(var_key(source))

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE,
                 use_generic_names=False):
        grads = super().gradient(target, sources, output_gradients,
                                 unconnected_gradients)
        out = reduce_except_local(self._hvd_reducer, tf.nest.flatten(grads),
                                  tf.nest.flatten(sources), self._hvd_local,
                                  self._hvd_scale_local)
        return tf.nest.pack_sequence_as(grads, out)


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=None, sparse_as_dense=False,
                            op=Average, gradient_predivide_factor=1.0,
                            num_groups=0, groups=None,
                            process_set=global_process_set,
                            scale_local_gradients=True):
    """Wraps `gradtape` so that gradient() averages (or `op`-reduces)
    the gradients across the ranks of `process_set`."""
    if not isinstance(gradtape, tf.GradientTape):
        raise ValueError("DistributedGradientTape wraps a tf.GradientTape, "
                         "got %s" % type(gradtape).__name__)
    if num_groups != 0 and groups is None:
        groups = num_groups
    reducer = GradientReducer("DistributedGradientTape", compression,
                              sparse_as_dense, op, gradient_predivide_factor,
                              groups, process_set)
    base = type(gradtape)
    if isinstance(gradtape, _DistributedTape):
        # Wrapped again: the new reducer replaces the old one, as Keras's
        # DistributedOptimizer does, rather than reducing twice.
        base = base.__mro__[2]
    cls = type(base.__name__, (_DistributedTape, base), {})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._hvd_setup(reducer, scale_local_gradients)
    return tape


def PartialDistributedGradientTape(gradtape, device_dense="",
                                   device_sparse="", compression=None,
                                   sparse_as_dense=False, op=Average,
                                   gradient_predivide_factor=1.0,
                                   num_groups=0, groups=None,
                                   process_set=global_process_set,
                                   local_layers=None,
                                   scale_local_gradients=True):
    """A DistributedGradientTape whose `local_layers` (a layer or a list of
    layers) keep their gradients local."""
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse,
                                   compression, sparse_as_dense, op,
                                   gradient_predivide_factor, num_groups,
                                   groups, process_set, scale_local_gradients)
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    for layer in local_layers:
        if not hasattr(layer, "trainable_weights"):
            raise ValueError(
                "local_layers takes a Keras layer or a list of them, got %s; "
                "a single variable is kept local with the tape's "
                "register_local_source" % type(layer).__name__)
        for w in layer.trainable_weights:
            tape.register_local_source(w)
    return tape
