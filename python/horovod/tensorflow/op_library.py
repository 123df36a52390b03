"""Horovod's TensorFlow op library (_tf_ops.so, src/tensorflow): loading
it, binding it to this process's engine, and calling its two ops.

The library is built against TensorFlow's stable C API only, so it loads
into any TensorFlow release that has it, and it reaches the engine through
the C table that horovod._core hands out (Engine.framework_api). It binds
when hvd.init() starts an engine and unbinds before shutdown.

HorovodCollective runs several engine operations ("units") in one kernel
call: every unit starts before any is waited for. A unit is (kind, count,
prefix, name): `count` consecutive tensors of one collective kind,
negotiated as `<prefix>.<name>`, or, eagerly and unnamed, as
`<prefix>.noname.<number>` with the number taken per process set at call
time, so the numbering matches the other adapters'.

Thread-safety: the functions may be called from any thread.
"""

import collections
import ctypes
import os

import tensorflow as tf

from horovod.common import ops as _ops
from horovod.common.exceptions import (HorovodInternalError,
                                       HorovodInvalidArgumentError)

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_tf_ops.so")
_lib = tf.load_op_library(_PATH)
# The same loaded object as TensorFlow's (one path, one load).
_bind = ctypes.CDLL(_PATH).horovod_tf_bind
_bind.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
_bind.restype = ctypes.c_int

_collectives = _ops.process_collectives()

Unit = collections.namedtuple("Unit", "kind count prefix name")

ALLREDUCE = int(_ops.OpType.allreduce.value)
ALLGATHER = int(_ops.OpType.allgather.value)
BROADCAST = int(_ops.OpType.broadcast.value)
ALLTOALL = int(_ops.OpType.alltoall.value)
REDUCESCATTER = int(_ops.OpType.reducescatter.value)


def _on_engine(engine):
    if engine is None:
        _bind(None, None)
        return
    api, address = engine.framework_api()
    if _bind(api, address) != 0:
        raise HorovodInternalError(
            "horovod's TensorFlow op library %s does not match this build of "
            "horovod (reinstall horovod)" % _PATH)


_collectives.basics.add_engine_listener(_on_engine)


# Eagerly, the attributes of named units, computed once per distinct units.
_named = {}


def _attributes(units, process_set_id, eager):
    """The units' kinds, sizes, name attributes and name numbers (an int64
    tensor: the op wrapper converting a Python list would leave
    TensorFlow's fast path)."""
    key = (units, eager)
    cached = _named.get(key)
    if cached is not None:
        return cached
    names, numbers = [], []
    for u in units:
        if u.name:
            names.append(_ops.op_name(u.prefix, u.name, 0))
            numbers.append(-1)
        elif eager:
            names.append(u.prefix + ".noname.")
            numbers.append(_collectives.unnamed_number(process_set_id))
        else:
            raise ValueError("operations in a graph are named at trace time")
    result = ([u.kind for u in units], [u.count for u in units], names,
              tf.constant(numbers, dtype=tf.int64))
    if eager and all(u.name for u in units):
        _named[key] = result
    return result


_allreduce_units = {}


def allreduce_units(name):
    """The units of hvd.allreduce of one tensor named `name` (None: numbered
    at call time), made once per name."""
    units = _allreduce_units.get(name)
    if units is None:
        units = _allreduce_units[name] = (Unit(ALLREDUCE, 1, "allreduce",
                                               name),)
    return units


def _message(error):
    """The engine's message without TensorFlow's decoration (a leading
    `{{function_node ...}} `, a trailing ` [Op:...]`)."""
    text = error.message
    if text.startswith("{{"):
        end = text.find("}} ")
        if end >= 0:
            text = text[end + 3:]
    cut = text.find(" [Op:")
    return text[:cut] if cut >= 0 else text


def _horovod_error(error):
    """Eagerly, Horovod's error types, as the other adapters raise them:
    input refused before anything was enqueued is a
    HorovodInvalidArgumentError (a ValueError), any other failure a
    HorovodInternalError. Graphs raise TensorFlow's OpErrors."""
    if isinstance(error, tf.errors.InvalidArgumentError):
        return HorovodInvalidArgumentError(_message(error))
    return HorovodInternalError(_message(error))


def collective(units, tensors, process_set_id, eager, reduce_op=_ops.Sum,
               prescale=1.0, postscale=1.0, root=0):
    """Runs `units` (a tuple of Unit) over `tensors` (laid out unit after
    unit); returns one output per tensor."""
    kinds, sizes, names, numbers = _attributes(units, process_set_id, eager)
    try:
        return _lib.horovod_collective(
            tensors, numbers, kinds=kinds, sizes=sizes, names=names,
            reduce_op=int(reduce_op), prescale=float(prescale),
            postscale=float(postscale), root=int(root),
            process_set=process_set_id)
    except tf.errors.OpError as e:
        if not eager:
            raise
        raise _horovod_error(e) from None


def alltoall(tensor, splits, prefix, name, process_set_id, eager):
    """(rows received, rows received from each member as int32)."""
    units = (Unit(ALLTOALL, 1, prefix, name),)
    _, _, names, numbers = _attributes(units, process_set_id, eager)
    try:
        return _lib.horovod_alltoall(
            tensor, splits, numbers, kinds=[ALLTOALL], sizes=[1],
            names=names, reduce_op=int(_ops.Sum), prescale=1.0,
            postscale=1.0, root=0, process_set=process_set_id)
    except tf.errors.OpError as e:
        if not eager:
            raise
        raise _horovod_error(e) from None
