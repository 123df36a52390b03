"""DistributedOptimizer for optax: a GradientTransformation whose update
first reduces the gradients (one grouped allreduce per step, so one ordered
callback under jit) and then runs the wrapped transformation."""

import jax

from horovod.common.grouping import check_passes, check_reduction_args
from horovod.common.ops import Average
from horovod.common.process_sets import global_process_set
from horovod.jax.mpi_ops import grouped_allreduce, size


def allreduce_gradients(grads, op=Average, gradient_predivide_factor=1.0,
                        name=None, process_set=global_process_set):
    """The pytree `grads` reduced across the ranks of the set as one unit
    (Average by default). None leaves stay None, and float0 leaves (the
    gradients of integer inputs under jax.grad(allow_int=True), which hold
    no values) stay as they are."""
    check_reduction_args(op, gradient_predivide_factor, None)
    if not process_set.included() or (process_set is global_process_set and
                                      size() == 1):
        return grads
    leaves, tree = jax.tree_util.tree_flatten(grads)
    carried = [k for k, g in enumerate(leaves)
               if getattr(g, "dtype", None) != jax.dtypes.float0]
    if not carried:
        return grads
    reduced = grouped_allreduce(
        [leaves[k] for k in carried], op=op,
        name=name or "DistributedOptimizer",
        prescale_factor=1.0 / gradient_predivide_factor,
        postscale_factor=gradient_predivide_factor, process_set=process_set)
    for k, g in zip(carried, reduced):
        leaves[k] = g
    return jax.tree_util.tree_unflatten(tree, leaves)


def DistributedOptimizer(optimizer, op=Average, gradient_predivide_factor=1.0,
                         backward_passes_per_step=1,
                         average_aggregated_gradients=False, name=None,
                         process_set=global_process_set):
    """Wraps an optax GradientTransformation so that update() sees the
    gradients reduced across ranks. With backward_passes_per_step = k > 1,
    gradients accumulate locally (optax.MultiSteps) and are reduced and
    applied every k-th update, summed over the passes or, with
    average_aggregated_gradients, averaged."""
    import optax
    if not (callable(getattr(optimizer, "init", None)) and
            callable(getattr(optimizer, "update", None))):
        raise ValueError("DistributedOptimizer wraps an optax "
                         "GradientTransformation, got %s"
                         % type(optimizer).__name__)
    # Wrapped again: the new reduction replaces the old one, as TensorFlow's
    # and Keras's wrappers do, rather than reducing twice.
    optimizer = _wrapped_by(optimizer) or optimizer
    check_passes(backward_passes_per_step)
    check_reduction_args(op, gradient_predivide_factor, None)
    k = int(backward_passes_per_step)
    # MultiSteps hands over the mean of the k passes.
    passes_scale = k if k > 1 and not average_aggregated_gradients else 1

    def init_fn(params):
        return optimizer.init(params)

    def update_fn(updates, state, params=None, **extra):
        if passes_scale != 1:
            updates = jax.tree_util.tree_map(lambda g: g * passes_scale,
                                             updates)
        updates = allreduce_gradients(updates, op, gradient_predivide_factor,
                                      name, process_set)
        return optimizer.update(updates, state, params, **extra)

    update_fn.horovod_wraps = optimizer
    tx = optax.GradientTransformationExtraArgs(init_fn, update_fn)
    if k > 1:
        tx = optax.MultiSteps(tx, every_k_schedule=k)
        tx.horovod_wraps = optimizer
    return tx


def _wrapped_by(tx):
    """The optimizer a DistributedOptimizer `tx` wraps, else None (marked
    on its update function, or on the MultiSteps it returned)."""
    return getattr(tx, "horovod_wraps", None) or \
        getattr(tx.update, "horovod_wraps", None)
