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

Eagerly, calls go to HorovodEagerCollective instead, which takes the same
units as the number of a plan registered once with the library (its only
attribute is its inputs' types), called through TensorFlow's eager fast
path: converting and hashing the eight attributes on every call, and the
generated wrapper's dispatch layers, cost more than the collective itself
when tensors are small.

Thread-safety: the functions may be called from any thread.
"""

import collections
import contextlib
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

_plan = ctypes.CDLL(_PATH).horovod_tf_plan
_plan.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64),
                  ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int,
                  ctypes.c_double, ctypes.c_double, ctypes.c_int, ctypes.c_int,
                  ctypes.c_char_p, ctypes.c_size_t]
_plan.restype = ctypes.c_int64

try:
    from tensorflow.python import pywrap_tfe as _pywrap_tfe
    from tensorflow.python.eager import context as _context
    from tensorflow.python.eager import core as _core
except ImportError:  # TensorFlow's private modules moved: the public wrapper
    _pywrap_tfe = None

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


# The attributes of named eager units (alltoall's, and any once the plan
# table is full), computed once per distinct units.
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


# Eagerly: (units, process set, reduction, scales, root) -> (plan number,
# the plan input when every unit is named, else None).
_plans = {}
# Set once the library's plan table is full: new arguments then go with
# their attributes (HorovodCollective), as in a graph.
_plans_full = False


def _eager_plan(units, process_set_id, reduce_op, prescale, postscale, root):
    """The plan input of HorovodEagerCollective for these arguments: the
    plan's number, then each unit's name number (-1 when named); None when
    the library holds no more plans."""
    global _plans_full
    key = (units, process_set_id, reduce_op, prescale, postscale, root)
    entry = _plans.get(key)
    if entry is None:
        if _plans_full:
            return None
        n = len(units)
        names = [(_ops.op_name(u.prefix, u.name, 0) if u.name
                  else u.prefix + ".noname.").encode() for u in units]
        error = ctypes.create_string_buffer(256)
        number = _plan((ctypes.c_int64 * n)(*[u.kind for u in units]),
                       (ctypes.c_int64 * n)(*[u.count for u in units]),
                       (ctypes.c_char_p * n)(*names), n, reduce_op,
                       prescale, postscale, root, process_set_id, error,
                       len(error))
        if number == -2:
            _plans_full = True
            return None
        if number < 0:
            raise HorovodInternalError(error.value.decode())
        named = all(u.name for u in units)
        entry = _plans[key] = (number, tf.constant(
            [number] + [-1] * n, dtype=tf.int64) if named else None)
    number, plan = entry
    if plan is not None:
        return plan
    return tf.constant([number] + [
        -1 if u.name else _collectives.unnamed_number(process_set_id)
        for u in units], dtype=tf.int64)


def _run_eager(tensors, plan):
    if _pywrap_tfe is not None:
        try:
            return _pywrap_tfe.TFE_Py_FastPathExecute(
                _context.context(), "HorovodEagerCollective", None, tensors,
                plan)
        except _core._NotOkStatusException as e:
            raise _core._status_to_exception(e) from None
        except _core._FallbackException:
            pass  # inputs the fast path does not take
    return _lib.horovod_eager_collective(tensors, plan)


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


def refuse(units, process_set_id, error):
    """For input this rank refuses before its kernel runs (`error` says
    why), eagerly: each unit is numbered as the kernel would number it, and
    the operation's peers fail with the reason rather than wait for this
    rank (Engine::Refuse). Returns once they have."""
    for u in units:
        _collectives.refuse_in_set(u.kind, u.count, u.prefix, u.name,
                                   process_set_id, error)


@contextlib.contextmanager
def refusing(units, process_set_id, eager):
    """Eagerly, input refused in the block (TypeError or ValueError) is
    refused to the units' peers too (refuse). A graph's input is refused
    while it is traced, when no peer runs the operation yet."""
    try:
        yield
    except (TypeError, ValueError) as e:
        if eager:
            refuse(units, process_set_id, e)
        raise


def collective(units, tensors, process_set_id, eager, reduce_op=_ops.Sum,
               prescale=1.0, postscale=1.0, root=0):
    """Runs `units` (a tuple of Unit) over `tensors` (laid out unit after
    unit); returns one output per tensor."""
    # Checked as the other adapters' numbers are: TypeError for a root of
    # 1.5 (int() would take rank 1), InvalidArgument past int's range.
    with refusing(units, process_set_id, eager):
        reduce_op, prescale, postscale, root = _collectives.handles.numbers(
            reduce_op, prescale, postscale, root)
    try:
        if eager:
            plan = _eager_plan(units, process_set_id, reduce_op, prescale,
                               postscale, root)
            if plan is not None:
                return _run_eager(tensors, plan)
        kinds, sizes, names, numbers = _attributes(units, process_set_id,
                                                   eager)
        return _lib.horovod_collective(
            tensors, numbers, kinds=kinds, sizes=sizes, names=names,
            reduce_op=reduce_op, prescale=prescale, postscale=postscale,
            root=root, process_set=process_set_id)
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
