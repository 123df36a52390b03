"""horovod.keras: Horovod for Keras 3 on any backend (KERAS_BACKEND
tensorflow, torch or jax): a DistributedOptimizer that reduces gradients
under model.fit and custom loops, callbacks, and collectives on the
backend's tensors."""

try:
    import keras as _keras
except ImportError as e:
    raise ImportError("horovod.keras needs Keras 3, which is not installed: "
                      "pip install keras==3.15.1") from e
if int(_keras.__version__.split(".")[0]) < 3:
    raise ImportError("horovod.keras needs Keras 3, found Keras %s"
                      % _keras.__version__)

from horovod import _keras as _impl
from horovod._keras import Compression, load_model  # noqa: F401
from horovod.common.exceptions import (HorovodInternalError,  # noqa: F401
                                       HorovodInvalidArgumentError)
from horovod.common import ops as _ops
from horovod.common.ops import (Adasum, Average, Max, Min,  # noqa: F401
                                Product, Sum, resolve_op)
from horovod.common.process_sets import ProcessSet, global_process_set  # noqa: F401
from horovod.common.topology import *  # noqa: F401,F403
from horovod.keras import callbacks  # noqa: F401

# The main thread may next block inside a compiled train step (see
# horovod.common.ops.leaving_census).
add_process_set, remove_process_set = \
    _ops.process_set_calls_leaving_census(_impl._collectives)


def DistributedOptimizer(optimizer, name=None, device_dense="",
                         device_sparse="", compression=None,
                         sparse_as_dense=False, gradient_predivide_factor=1.0,
                         op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0,
                         groups=None, process_set=global_process_set,
                         scale_local_gradients=True):
    """A copy of the Keras `optimizer` (same class and config) that reduces
    gradients across the ranks of `process_set` before every update. With
    backward_passes_per_step > 1 it accumulates that many passes locally
    (Keras's gradient_accumulation_steps) and reduces only the sum (or, with
    average_aggregated_gradients, the mean)."""
    if num_groups != 0 and groups is None:
        groups = num_groups
    return _impl.create_distributed_optimizer(
        optimizer, name, compression, sparse_as_dense,
        gradient_predivide_factor, op, backward_passes_per_step,
        average_aggregated_gradients, groups, process_set,
        scale_local_gradients)


def PartialDistributedOptimizer(optimizer, name=None, device_dense="",
                                device_sparse="", compression=None,
                                sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average,
                                backward_passes_per_step=1,
                                average_aggregated_gradients=False,
                                groups=None, process_set=global_process_set,
                                scale_local_gradients=True, local_layers=None):
    """A DistributedOptimizer whose `local_layers` (a Keras layer or a list
    of them) keep their gradients local, as register_local_var does for each
    of their trainable weights (model parallelism: layers each rank holds
    alone)."""
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, _keras.layers.Layer):
        local_layers = [local_layers]
    local_layers = list(local_layers)
    for layer in local_layers:
        if not isinstance(layer, _keras.layers.Layer):
            raise ValueError("local_layers must be Keras layers, got %r"
                             % (layer,))
    opt = DistributedOptimizer(
        optimizer, name, device_dense, device_sparse, compression,
        sparse_as_dense, gradient_predivide_factor, op,
        backward_passes_per_step, average_aggregated_gradients, 0, groups,
        process_set, scale_local_gradients)
    for layer in local_layers:
        for w in layer.trainable_weights:
            opt.register_local_var(w)
    return opt


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """Makes every rank's Keras variables equal to root_rank's."""
    _impl.broadcast_variables(variables, root_rank, process_set)


def allreduce(value, name=None, average=None, prescale_factor=1.0,
              postscale_factor=1.0, op=None, compression=None,
              process_set=global_process_set):
    """Reduces a backend tensor (or array-like) over the ranks; Average by
    default."""
    hvd = _impl.backend_module()
    compression = compression or Compression.none
    tensor, ctx = compression.compress(_keras.ops.convert_to_tensor(value))
    out = hvd.allreduce(tensor, name=name, op=resolve_op(average, op),
                        prescale_factor=prescale_factor,
                        postscale_factor=postscale_factor,
                        process_set=process_set)
    return compression.decompress(out, ctx)


def allgather(value, name=None, process_set=global_process_set):
    """Concatenates every rank's backend tensor along dimension 0."""
    return _impl.backend_module().allgather(
        _keras.ops.convert_to_tensor(value), name=name,
        process_set=process_set)


def broadcast(value, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's backend tensor on every rank."""
    return _impl.backend_module().broadcast(
        _keras.ops.convert_to_tensor(value), root_rank, name=name,
        process_set=process_set)


def reducescatter(value, name=None, op=Average,
                  process_set=global_process_set):
    """Reduces a backend tensor and returns this rank's share of dim 0."""
    return _impl.backend_module().reducescatter(
        _keras.ops.convert_to_tensor(value), name=name, op=op,
        process_set=process_set)


def broadcast_object(obj, root_rank=0, name=None,
                     process_set=global_process_set):
    """Returns root_rank's obj (cloudpickled) on every rank."""
    return _ops.leaving_census(_impl._collectives, _ops.broadcast_object,
                               _impl._collectives, obj, root_rank, name,
                               process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's obj, in rank order."""
    return _ops.leaving_census(_impl._collectives, _ops.allgather_object,
                               _impl._collectives, obj, name, process_set)


from horovod.keras import elastic  # noqa: F401,E402
