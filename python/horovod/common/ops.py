"""The framework-neutral core of every adapter: reduction ops, operation
names, the handle table, engine calls with their error mapping, and object
collectives.

Arrays cross into the engine as anything that speaks DLPack (a torch tensor,
a NumPy array, a TensorFlow or JAX array exported with ``__dlpack__``), with
no copy. Outputs the engine allocates come back as DLPack-capable arrays that
the adapter wraps with its framework's ``from_dlpack``, again without a copy.
Nothing here knows about autograd or any framework's types.

Thread-safety: a Collectives object may be used from any thread.
"""

import threading
import warnings

from horovod import _core
from horovod.common import compile_guard
from horovod.common.exceptions import (HorovodInternalError,
                                       HorovodInvalidArgumentError)
from horovod.common.process_sets import ProcessSet, global_process_set

compile_guard.install()

# Reduction ops, with the engine's values (upstream's numbering).
Average = _core.ReduceOp.Average.value
Sum = _core.ReduceOp.Sum.value
Adasum = _core.ReduceOp.Adasum.value
Min = _core.ReduceOp.Min.value
Max = _core.ReduceOp.Max.value
Product = _core.ReduceOp.Product.value

OpType = _core.OpType
DataType = _core.DataType


def resolve_op(average, op):
    """Upstream's handling of the deprecated `average` flag next to `op`."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide "
                         "only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and "
                      "will be removed in v1.0", DeprecationWarning)
        return Average if average else Sum
    return Average if op is None else op


def op_name(prefix, name, number):
    """The name the ranks negotiate under, formed as upstream forms it:
    `<prefix>.<name>`, or `<prefix>.noname.<number>` for an unnamed
    operation. Timelines and stall warnings show these names."""
    if name:
        return "%s.%s" % (prefix, name)
    return "%s.noname.%d" % (prefix, number)


def explained(explain, arrays, error):
    """The first of ``explain(array, error)`` over `arrays` that is not
    `error` itself (a clearer error for input a framework could not hand
    over), else `error`."""
    for a in arrays:
        clearer = explain(a, error)
        if clearer is not error:
            return clearer
    return error


def unsupported_dtype(dtype_name, rank):
    """The error for a dtype the engine does not carry, checked by adapters
    whose framework would fail less clearly first."""
    return HorovodInvalidArgumentError(
        "unsupported tensor dtype %s (rank %d): horovod supports uint8, int8, "
        "int16, int32, int64, float16, bfloat16, float32, float64 and bool"
        % (dtype_name, rank))


def engine_call(fn, *args):
    """Calls into the engine. Bad input raises HorovodInvalidArgumentError
    (a ValueError); a failed or shut-down engine HorovodInternalError."""
    try:
        return fn(*args)
    except HorovodInternalError:
        raise
    except ValueError as e:
        raise HorovodInvalidArgumentError(str(e)) from None
    except RuntimeError as e:
        raise HorovodInternalError(str(e)) from None


def _is_numpy_bfloat16(a):
    dtype = getattr(a, "dtype", None)
    return getattr(dtype, "name", None) == "bfloat16" and \
        type(a).__module__ == "numpy"


def _bfloat16_as_bits(arrays):
    """NumPy cannot export bfloat16 (ml_dtypes) through DLPack: such arrays
    go to the engine as int16 views of the same memory, with their
    positions, and the engine treats them as bfloat16."""
    bits = [i for i, a in enumerate(arrays) if _is_numpy_bfloat16(a)]
    if not bits:
        return arrays, bits
    import numpy as np
    views = list(arrays)
    for i in bits:
        views[i] = arrays[i].view(np.int16)
    return views, bits


class Collectives:
    """Enqueues collectives on the engine of `basics` (a HorovodBasics) and
    keeps their handles."""

    def __init__(self, basics):
        self._basics = basics
        # Integer handles, as users of upstream's API hold them, mapped to
        # the engine's handles and to the adapter's `finish(core_handles)`,
        # which turns finished engine handles into the framework's result.
        # Its enqueue_one raises these two types itself.
        self.handles = _core.HandleTable(HorovodInvalidArgumentError,
                                         HorovodInternalError)
        self._lock = threading.Lock()
        self._unnamed = {}
        basics.add_engine_listener(self._on_engine)

    def _on_engine(self, engine):
        # Each engine numbers unnamed operations from 0 on every rank, as
        # the kernels do (EngineBinding::NextNumber): a worker that joins an
        # elastic job at a reset starts where the others start again.
        with self._lock:
            self._unnamed.clear()
        self.handles.bind(engine)  # its enqueue_one submits to this engine

    def unnamed_number(self, ps):
        """Unnamed operations are numbered per process set, so the members
        of a set agree on the numbers as long as they issue the set's
        operations in the same order, whatever else each rank does (a
        non-member skipping a set's gradient exchange, say)."""
        with self._lock:
            k = self._unnamed.get(ps, 0)
            self._unnamed[ps] = k + 1
            return k

    @property
    def basics(self):
        return self._basics

    @staticmethod
    def process_set_id(process_set):
        if not isinstance(process_set, ProcessSet):
            raise ValueError("process_set must be a horovod ProcessSet, got %r"
                             % (process_set,))
        if process_set.process_set_id is None:
            raise ValueError("process set %r is not registered: pass it to "
                             "hvd.init(process_sets=...) or "
                             "hvd.add_process_set" % (process_set,))
        return process_set.process_set_id

    def enqueue(self, op, arrays, prefix, name, finish, reduce_op=Sum,
                prescale=1.0, postscale=1.0, root=0, splits=(),
                process_set=global_process_set, export=None, sources=None,
                explain=None):
        """Starts one operation over `arrays` (a group when several) and
        returns its handle number; synchronize() then returns
        finish(core_handles). `export`, when given, turns an array into
        the DLPack capsule the engine reads, for frameworks with a faster
        way to make one than the array's ``__dlpack__``. An allreduce with
        `sources` (one per array, each of its array's dtype and shape, and
        a `finish`) is out of place: the engine reads each source and
        writes the result into its array; the sources stay alive until
        synchronize. An array `export` fails on is refused to the
        operation's peers too, with ``explain(array, error)``'s error when
        given (a clearer one than the framework's, or `error`)."""
        engine = self._basics.engine
        ps = self.process_set_id(process_set)
        arrays = list(arrays)
        full_name = op_name(prefix, name, 0 if name else self.unnamed_number(ps))
        sources = list(sources) if sources else []
        try:
            if export is None:
                views, bits = _bfloat16_as_bits(arrays)
                froms = _bfloat16_as_bits(sources)[0]
            else:
                views, bits = [export(a) for a in arrays], []
                froms = [export(a) for a in sources]
        except Exception as e:
            error = explained(explain, arrays + sources, e) if explain \
                else e
            self.handles.refuse(op.value, full_name, ps, len(arrays),
                                str(error))
            if error is e:
                raise
            raise error from None
        keep = (arrays, sources) if sources else arrays
        core = engine_call(engine.enqueue, op.value, views, full_name,
                           reduce_op, prescale, postscale, root,
                           [int(s) for s in splits] if splits else [], ps,
                           bits, froms)
        return self.handles.add(core, finish, keep)

    def refuse(self, op, arrays, prefix, name, process_set, error):
        """For a call whose `arrays` this rank refuses before enqueueing
        them (`error` says why): the operation is numbered as enqueue
        numbers it, and its peers fail with the reason rather than wait
        for this rank (Engine::Refuse). Returns once they have."""
        if not self._basics.is_initialized():
            return  # no job: no peer waits
        try:
            ps = self.process_set_id(process_set)
        except ValueError:
            return  # a set it cannot run on: no peer waits either
        self.refuse_in_set(op.value, len(arrays), prefix, name, ps, error)

    def refuse_in_set(self, op, count, prefix, name, process_set_id, error):
        """refuse, for an operation of `count` arrays on the set numbered
        `process_set_id`, `op` an OpType's value."""
        full_name = op_name(prefix, name, 0 if name else
                            self.unnamed_number(process_set_id))
        self.handles.refuse(op, full_name, process_set_id, count, str(error))

    def enqueue_one(self, op, capsule, keep, prefix, name, finish,
                    reduce_op=Sum, prescale=1.0, postscale=1.0, root=0,
                    process_set=global_process_set, source=None):
        """enqueue for one array already exported as a DLPack `capsule`
        (`keep`: what must stay alive until synchronize, and its result
        when `finish` is None), with no splits: the per-call path of the
        common collectives, written flat (each call layer costs a tensor's
        share of the engine's own time). `op` is an OpType's value (reading
        an enum member's value costs more than the rest). A caller with a
        non-empty str name, on the global process set, may call
        ``handles.enqueue_one`` itself with process set 0: this adds only
        the unnamed numbering and the process set's lookup. An allreduce
        with a `source` (a DLPack capsule of the same dtype and shape) is
        out of place: the engine reads `source` and writes the result into
        `capsule`'s memory, and `source` stays alive until synchronize."""
        ps = 0 if process_set is global_process_set else \
            self.process_set_id(process_set)
        if not name:  # the engine joins prefix and name (op_name's form)
            prefix, name = op_name(prefix, name, self.unnamed_number(ps)), ""
        elif type(name) is not str:
            name = str(name)
        return self.handles.enqueue_one(
            op, capsule, keep, finish, prefix, name, reduce_op, prescale,
            postscale, root, ps, source)

    def allreduce_async_function(self, export, fallback):
        """An adapter's in-place ``allreduce_async_(tensor, average, name,
        op, prescale_factor, postscale_factor, process_set)`` as one C
        function: a named, contiguous tensor on the global process set, with
        an int op (or None: Average) and numeric scale factors, is exported
        by `export`, enqueued and filed with no Python frame, and returns
        its handle number; any other call goes to `fallback`, the adapter's
        Python implementation, with the same arguments."""
        return _core.allreduce_async_function(
            self.handles, export, fallback, global_process_set, Average)

    def poll(self, handle):
        return self.handles.poll(handle)

    def synchronize(self, handle):
        return self.handles.synchronize(handle)

    def leave_census(self):
        """The calling thread, with nothing outstanding, stops counting as
        one of this rank's submitters until it submits again (see
        Engine::LeaveCensus): adapters whose collectives run on a
        framework's worker threads call it after each one."""
        engine = self._basics._engine
        if engine is not None:
            engine.leave_census()

    def barrier(self, process_set=global_process_set):
        engine_call(self._basics.engine.barrier,
                    self.process_set_id(process_set))

    def join(self):
        return engine_call(self._basics.engine.join)


class EngineArray:
    """The engine-allocated result of a finished allgather, alltoall or
    reducescatter, as a DLPack producer: any framework's from_dlpack wraps
    it without a copy (each export keeps the engine's buffer alive). The
    dtype is the one the handle recorded at enqueue."""

    def __init__(self, core_handle):
        self._handle = core_handle

    def __dlpack__(self, stream=None, **_):
        return self._handle.output_array()

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0

    @property
    def shape(self):
        return tuple(self._handle.output_shape)


def output_array(core_handle):
    return EngineArray(core_handle)


def output_numpy(core_handle):
    """A finished operation's engine-allocated output as a NumPy array,
    without a copy (bfloat16 through ml_dtypes, which NumPy's DLPack import
    lacks)."""
    import numpy as np
    if core_handle.dtype == DataType.bfloat16:
        import ml_dtypes

        class _Bits:
            def __dlpack__(self, stream=None, **_):
                return core_handle.output_array(True)

            def __dlpack_device__(self):
                return (1, 0)
        return np.from_dlpack(_Bits()).view(ml_dtypes.bfloat16)
    return np.from_dlpack(output_array(core_handle))


_process_lock = threading.Lock()
_process_collectives = None


def process_collectives():
    """The one Collectives (and, through it, the one HorovodBasics and
    engine) of this process, shared by every framework adapter: a Keras
    script on the torch backend and horovod.torch calls in the same process
    use one job, one init and one numbering of unnamed operations."""
    global _process_collectives
    with _process_lock:
        if _process_collectives is None:
            from horovod.common.basics import HorovodBasics
            _process_collectives = Collectives(HorovodBasics())
        return _process_collectives


# -- objects -----------------------------------------------------------------
# Objects travel as cloudpickle bytes in uint8 arrays, and only between ranks
# of this job (every link is authenticated with the job's secret).

def _pickled(obj):
    """(obj as cloudpickle bytes in a uint8 array, None), or (the failure's
    text as such an array, the exception) when obj cannot be pickled: the
    text goes to the peers in its place, with its length negated, so that
    they raise too instead of waiting for bytes that never come."""
    import cloudpickle
    import numpy as np
    try:
        data, error = cloudpickle.dumps(obj), None
    except Exception as e:  # noqa: BLE001 - any pickling failure
        data = ("%s: %s" % (type(e).__name__, e)).encode("utf-8", "replace")
        error = e
    return np.frombuffer(bytearray(data), dtype=np.uint8), error


def _length(data, error):
    return -1 - data.size if error is not None else data.size


def _unpicklable(what, failed):
    """The error for ranks whose peers could not pickle their objects:
    `failed` is [(rank, their failure's text)]."""
    return HorovodInvalidArgumentError(
        "%s: %s" % (what, "; ".join("rank %d could not pickle its object: %s"
                                    % f for f in failed)))


def leaving_census(collectives, fn, *args):
    """fn(*args), after which the calling thread stops counting as one of
    the rank's submitters until it submits again. For adapters whose
    framework later blocks that thread in its own compiled code (a
    tf.function, a jitted JAX computation) while the collectives run on the
    framework's threads: still counted, the thread would look like one
    that computes, and a rank blocked there would never be found stuck by
    the deadlock check (the stall check would fail it minutes later)."""
    try:
        return fn(*args)
    finally:
        collectives.leave_census()


def process_set_calls_leaving_census(collectives):
    """add_process_set and remove_process_set for the adapters that use
    leaving_census: each registers or removes the set on every rank (the
    engine's control operation) and then leaves the census."""
    from horovod.common import topology

    def add_process_set(process_set):
        return leaving_census(collectives, topology.add_process_set,
                              process_set)

    def remove_process_set(process_set):
        return leaving_census(collectives, topology.remove_process_set,
                              process_set)
    add_process_set.__doc__ = topology.add_process_set.__doc__
    remove_process_set.__doc__ = topology.remove_process_set.__doc__
    return add_process_set, remove_process_set


def broadcast_object(collectives, obj, root_rank=0, name=None,
                     process_set=global_process_set):
    import cloudpickle
    import numpy as np
    # One default for every rank: the others often pass None for obj.
    name = name or "broadcast_object"
    rank = collectives._basics.rank()
    error = None
    if rank == root_rank:
        payload, error = _pickled(obj)
        length = np.array([_length(payload, error)], dtype=np.int64)
    else:
        payload = None
        length = np.zeros(1, dtype=np.int64)
    collectives.synchronize(collectives.enqueue(
        OpType.broadcast, [length], "broadcast", name + ".sz",
        lambda _: None, root=root_rank, process_set=process_set))
    size = int(length[0])
    if payload is None:
        payload = np.zeros(size if size >= 0 else -1 - size, dtype=np.uint8)
    collectives.synchronize(collectives.enqueue(
        OpType.broadcast, [payload], "broadcast", name + ".t",
        lambda _: None, root=root_rank, process_set=process_set))
    if error is not None:
        raise error
    if size < 0:
        raise _unpicklable("broadcast_object", [
            (root_rank, payload.tobytes().decode("utf-8", "replace"))])
    if rank == root_rank:
        return obj
    return cloudpickle.loads(payload.tobytes())


def allgather_object(collectives, obj, name=None,
                     process_set=global_process_set):
    import cloudpickle
    import numpy as np
    name = name or "allgather_object"
    data, error = _pickled(obj)

    def gathered(chs):
        return output_numpy(chs[0])
    sizes = collectives.synchronize(collectives.enqueue(
        OpType.allgather, [np.array([_length(data, error)], dtype=np.int64)],
        "allgather", name + ".sz", gathered, process_set=process_set))
    flat = collectives.synchronize(collectives.enqueue(
        OpType.allgather, [data], "allgather", name + ".t", gathered,
        process_set=process_set))
    members = process_set.ranks or range(len(sizes))
    out, failed, offset = [], [], 0
    for member, size in zip(members, sizes.tolist()):
        n = size if size >= 0 else -1 - size
        chunk = flat[offset:offset + n].tobytes()
        offset += n
        if size < 0:
            failed.append((member, chunk.decode("utf-8", "replace")))
        elif not failed:
            out.append(chunk)
    if error is not None:
        raise error
    if failed:
        raise _unpicklable("allgather_object", failed)
    return [cloudpickle.loads(chunk) for chunk in out]
