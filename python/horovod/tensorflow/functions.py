"""Helpers built on the collectives: variable broadcast and object
collectives."""

import tensorflow as tf

from horovod.common import ops as _ops
from horovod.common.process_sets import global_process_set
from horovod.tensorflow.mpi_ops import _collectives, broadcast_


def broadcast_variables(variables, root_rank, process_set=global_process_set,
                        inplace=False):
    """Makes every rank's `variables` equal to root_rank's, as one
    negotiated unit. Eagerly this happens now; in a graph the returned op
    does it when run."""
    variables = list(variables)
    if not variables:
        return None if tf.executing_eagerly() else tf.no_op()
    assigned = broadcast_(variables, root_rank, process_set=process_set)
    if tf.executing_eagerly():
        return None
    return tf.group(*assigned)


def broadcast_global_variables(root_rank):
    """Broadcasts every tf.compat.v1 global variable from root_rank (graph
    mode only; eagerly, use broadcast_variables)."""
    if tf.executing_eagerly():
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager "
            "execution. Please use `hvd.broadcast_variables(<model/optimizer "
            "variables>)` instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """Serializes obj on root_rank with cloudpickle and returns a copy of it
    on every rank. Bytes come only from a rank of this authenticated job.
    Works in graph mode too: no graph op is involved, so `session` is not
    needed."""
    return _ops.leaving_census(_collectives, _ops.broadcast_object,
                               _collectives, obj, root_rank, name,
                               process_set)


def broadcast_object_fn(root_rank=0, session=None, name=None,
                        process_set=global_process_set):
    """A function that broadcasts its argument from root_rank."""
    def broadcast_fn(obj):
        return broadcast_object(obj, root_rank, session, name, process_set)
    return broadcast_fn


def allgather_object(obj, session=None, name=None,
                     process_set=global_process_set):
    """Returns the list of every rank's obj, in rank order."""
    return _ops.leaving_census(_collectives, _ops.allgather_object,
                               _collectives, obj, name, process_set)
