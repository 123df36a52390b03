"""GradientReducer: reduces one step's gradients across the ranks of a
process set, as DistributedGradientTape, the tf.compat.v1
DistributedOptimizer and Keras's DistributedOptimizer need.

A step's gradients are started together and waited for once, in one call of
the op library's kernel. One blocking collective per gradient would
deadlock ranks whose graph executors (a small inter-op thread pool)
schedule those collectives in different orders; one unit per step cannot.

Thread-safety: reduce() may be called from any thread.
"""

import tensorflow as tf

from horovod.common.compression import checked as checked_compression
from horovod.common.grouping import check_reduction_args, group_plan
from horovod.common.ops import Average
from horovod.common.process_sets import global_process_set
from horovod.tensorflow import mpi_ops as _mpi
from horovod.tensorflow.op_library import ALLGATHER, ALLREDUCE, Unit


def variable_name(v):
    """A variable's name for operation names: Keras 3's path, else
    TensorFlow's name."""
    return getattr(v, "path", None) or getattr(v, "name", None) or "var"


def var_key(v):
    """A hashable identity for a variable (tf.Variable or Keras 3
    variable)."""
    ref = getattr(v, "ref", None)
    return ref() if callable(ref) else id(v)


class GradientReducer:
    def __init__(self, name="DistributedGradientTape", compression=None,
                 sparse_as_dense=False, op=Average,
                 gradient_predivide_factor=1.0, groups=None,
                 process_set=global_process_set):
        from horovod.tensorflow.compression import Compression
        check_reduction_args(op, gradient_predivide_factor, groups)
        self._name = name
        self._compression = checked_compression(compression,
                                                Compression.none)
        self._sparse_as_dense = sparse_as_dense
        self._op = op
        # Average split around the sum: 1/f before, f/size after.
        self._prescale = 1.0 / gradient_predivide_factor
        self._postscale = gradient_predivide_factor
        self._groups = groups
        self._process_set = process_set

    @property
    def process_set(self):
        return self._process_set

    def reduce(self, grads, variables):
        """The reduced gradients, in the order given; None stays None. A
        rank outside the process set gets its own gradients back."""
        grads = list(grads)
        variables = list(variables)
        ps = self._process_set
        if not ps.included() or (ps is global_process_set and
                                 _mpi.size() == 1):
            return grads
        if self._sparse_as_dense:
            grads = [tf.convert_to_tensor(g)
                     if isinstance(g, tf.IndexedSlices) else g for g in grads]
        present = [i for i, g in enumerate(grads) if g is not None]
        dense_at = [i for i in present
                    if not isinstance(grads[i], tf.IndexedSlices)]
        sparse_at = [i for i in present
                     if isinstance(grads[i], tf.IndexedSlices)]
        pairs = [self._compression.compress(tf.convert_to_tensor(grads[i]))
                 for i in dense_at]
        dense = [c for c, _ in pairs]
        plan = group_plan([variables[i] for i in dense_at], self._groups,
                          var_key)
        names = ["%s.%d.%s" % (self._name, i,
                               _mpi._normalize_name(variable_name(variables[i])))
                 for i in range(len(variables))]
        op, pre, post = self._op, self._prescale, self._postscale
        # One kernel call: the dense groups, then each sparse gradient's
        # values and indices gathered as a pair.
        units, order = [], []
        for unit in plan:
            units.append(Unit(
                ALLREDUCE, len(unit),
                "grouped_allreduce" if len(unit) > 1 else "allreduce",
                names[dense_at[unit[0]]]))
            order.extend(unit)
        inputs = [dense[k] for k in order]
        shapes = [dense[k].shape for k in order]
        for i in sparse_at:
            units.append(Unit(ALLGATHER, 2, "grouped_allgather", names[i]))
            inputs += [grads[i].values, grads[i].indices]
            shapes += [_mpi._rows_unknown(grads[i].values), [None]]
        if not inputs:
            return grads
        exchanged = _mpi._run_units(units, inputs, ps, shapes, reduce_op=op,
                                    prescale=pre, postscale=post)
        outs = [None] * len(dense)
        for k, t in zip(order, exchanged):
            outs[k] = t
        outs += exchanged[len(order):]
        result = list(grads)
        for k, i in enumerate(dense_at):
            result[i] = self._compression.decompress(outs[k], pairs[k][1])
        base = len(dense)
        for j, i in enumerate(sparse_at):
            values, indices = outs[base + 2 * j], outs[base + 2 * j + 1]
            values = _mpi._scale_gathered_values(values, op, pre, post, ps)
            result[i] = tf.IndexedSlices(values, indices,
                                         dense_shape=grads[i].dense_shape)
        return result


def reduce_except_local(reducer, grads, variables, local_keys,
                        scale_local_gradients):
    """`reducer`'s reduction of every gradient whose variable's key is not
    in `local_keys`; the local ones stay local (divided by the set size
    when scale_local_gradients, as upstream)."""
    local = [i for i, v in enumerate(variables) if var_key(v) in local_keys]
    shared = [i for i in range(len(variables)) if i not in local]
    reduced = reducer.reduce([grads[i] for i in shared],
                             [variables[i] for i in shared])
    out = list(grads)
    for i, g in zip(shared, reduced):
        out[i] = g
    if scale_local_gradients and local and reducer.process_set.included():
        out = scale_local(out, local, reducer.process_set)
    return out


def scale_local(grads, local, process_set):
    """Local (unreduced) gradients divided by the set size, as upstream's
    scale_local_gradients, so they weigh like the averaged ones."""
    n = process_set.size()
    out = list(grads)
    for i in local:
        g = out[i]
        if g is None:
            continue
        if isinstance(g, tf.IndexedSlices):
            out[i] = tf.IndexedSlices(g.values / n, g.indices, g.dense_shape)
        else:
            out[i] = g / n
    return out
