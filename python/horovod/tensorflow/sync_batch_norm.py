"""SyncBatchNormalization: Keras batch normalization whose training-time
statistics are computed over the whole batch of every rank of the process
set, not each rank's share. Gradients flow through the reduction."""

import tensorflow as tf

try:
    from keras.layers import BatchNormalization as _BatchNormalization
except ImportError:  # Keras 3 ships with TensorFlow 2.16+
    _BatchNormalization = tf.keras.layers.BatchNormalization

from horovod.common.ops import Sum
from horovod.common.process_sets import global_process_set
from horovod.tensorflow.mpi_ops import _grouped_allreduce


class SyncBatchNormalization(_BatchNormalization):
    def __init__(self, fused=False, process_set=global_process_set, **kwargs):
        if fused:
            raise ValueError("SyncBatchNormalization does not support fused "
                             "kernels: pass fused=False")
        kwargs.pop("synchronized", None)
        super().__init__(**kwargs)
        self._process_set = process_set

    def _moments(self, inputs, mask):
        x = tf.convert_to_tensor(inputs)
        if mask is None:
            weights = tf.ones_like(x)
        else:
            weights = tf.cast(tf.broadcast_to(tf.expand_dims(mask, -1),
                                              tf.shape(x)), x.dtype)
        axes = self._reduction_axes
        count = tf.reduce_sum(weights, axis=axes)
        total = tf.reduce_sum(x * weights, axis=axes)
        squares = tf.reduce_sum(tf.square(x) * weights, axis=axes)
        if self._process_set.included():
            count, total, squares = _grouped_allreduce(
                [count, total, squares], op=Sum,
                name=None if tf.executing_eagerly() else "sync_batch_norm",
                process_set=self._process_set)
        count = tf.maximum(count, 1.0)
        mean = total / count
        variance = tf.maximum(squares / count - tf.square(mean), 0.0)
        return mean, variance
