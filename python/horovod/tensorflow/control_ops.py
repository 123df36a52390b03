"""Horovod's TensorFlow control operations, with upstream's names: join,
barrier and the topology ops. They are rare and carry no tensors, so each
runs as a tf.py_function in a graph (read when the graph runs, so a graph
built before a job re-forms still reports the job it runs in) and as a
plain call eagerly.

Thread-safety: as horovod.common.ops; every function may be called from any
thread.
"""

import tensorflow as tf

from horovod.common.exceptions import HorovodInvalidArgumentError
from horovod.common.process_sets import global_process_set
from horovod.common.topology import local_rank, local_size, rank
from horovod.tensorflow.mpi_ops import _collectives, _run, _synchronous


def join():
    """Declares this rank out of data: until every rank has joined, it takes
    part in other ranks' allreduces with zeros. Returns the last rank to
    join, as an int32 tensor."""
    return _run(lambda _: [tf.constant(_collectives.join(), dtype=tf.int32)],
                [], [tf.int32])[0]


def barrier(process_set=global_process_set):
    """Blocks until every rank of the set has reached the barrier. In a
    graph, returns the op that does so when run."""
    def wait(_):
        _collectives.barrier(process_set)
        return [tf.constant(0, dtype=tf.int32)]
    if tf.executing_eagerly():
        _synchronous(wait, [])
        return None
    return _run(wait, [], [tf.int32])[0].op


def _topology_op(value_fn, name):
    """An int32 scalar read when the graph runs (so a graph built before a
    job re-forms still reports the job it runs in)."""
    with tf.name_scope(name or "horovod_topology"):
        return tf.reshape(_run(
            lambda _: [tf.constant(value_fn(), dtype=tf.int32)],
            [], [tf.int32])[0], [])


def _set_of(process_set_id):
    ps = _collectives.basics.process_set_by_id(process_set_id)
    if ps is not None:
        return ps
    raise HorovodInvalidArgumentError(
        "process set %r is not registered (rank %d)" % (process_set_id,
                                                        rank()))


def size_op(process_set_id=0, name=None):
    """The number of ranks in the process set, as an int32 tensor."""
    return _topology_op(lambda: _set_of(process_set_id).size(), name)


def local_size_op(name=None):
    """The number of ranks on this host, as an int32 tensor."""
    return _topology_op(local_size, name)


def rank_op(name=None):
    """This process's rank, as an int32 tensor."""
    return _topology_op(rank, name)


def local_rank_op(name=None):
    """This process's rank on its host, as an int32 tensor."""
    return _topology_op(local_rank, name)


def process_set_included_op(process_set_id=0, name=None):
    """1 if this rank belongs to the process set, else 0 (int32 tensor)."""
    return _topology_op(lambda: int(_set_of(process_set_id).included()),
                        name)
