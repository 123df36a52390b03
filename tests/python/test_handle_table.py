"""The handle table behind upstream's integer handles (horovod._core's
HandleTable, src/python/handle_table.cc), in one process: what synchronize
returns, what stays referenced until then, and the answers for numbers it
does not hold. Engine-backed entries are covered by the multi-rank checks
(tests/python/workers/checks_collectives.py, checks_errors.py)."""

import ctypes
import gc
import weakref

import pytest

from horovod import _core
from horovod.common.exceptions import (HorovodInternalError,
                                       HorovodInvalidArgumentError)


class Payload:
    """Something weak-referenceable to watch the table's references."""


def table():
    return _core.HandleTable(HorovodInvalidArgumentError,
                             HorovodInternalError)


def test_numbers_are_fresh_and_synchronize_returns_the_arrays():
    t = table()
    a, b = Payload(), Payload()
    ha = t.add([], None, a)
    hb = t.add([], None, b)
    assert ha != hb
    assert t.poll(ha) and t.poll(hb)  # no engine handle left to finish
    assert t.synchronize(hb) is b
    assert t.synchronize(ha) is a


def test_finish_receives_the_core_handles_and_gives_the_result():
    t = table()
    core = []
    seen = []

    def finish(handles):
        seen.append(handles)
        return "result"

    h = t.add(core, finish, Payload())
    assert t.synchronize(h) == "result"
    assert seen == [core] and seen[0] is core


def test_arrays_stay_referenced_until_synchronize():
    t = table()
    p = Payload()
    ref = weakref.ref(p)
    h = t.add([], None, p)
    del p
    gc.collect()
    assert ref() is not None  # the engine may still write it
    out = t.synchronize(h)
    assert out is ref()
    del out
    gc.collect()
    assert ref() is None  # the table let go


def test_a_dropped_table_lets_go_of_what_it_still_holds():
    # Entries never synchronized (side by side, and set aside once many
    # later ones were filed) are released with their table.
    t = table()
    kept = [Payload(), Payload()]
    refs = [weakref.ref(p) for p in kept]
    finish = Payload()
    finish_ref = weakref.ref(finish)
    t.add([], None, kept[0])
    t.add([], finish, kept[1])
    for _ in range(70000):
        t.synchronize(t.add([], None, Payload()))
    del kept, finish
    gc.collect()
    assert all(r() is not None for r in refs) and finish_ref() is not None
    del t
    gc.collect()
    assert all(r() is None for r in refs) and finish_ref() is None


def test_unknown_or_synchronized_numbers():
    t = table()
    h = t.add([], None, Payload())
    assert t.synchronize(h) is not None
    assert t.synchronize(h) is None  # already synchronized, as upstream
    assert t.synchronize(987654321) is None
    with pytest.raises(ValueError,
                       match="unknown or already synchronized handle 987"):
        t.poll(987654321)
    with pytest.raises(ValueError, match="unknown or already synchronized"):
        t.poll(h)


def test_a_failing_finish_propagates_and_the_entry_is_gone():
    t = table()

    def finish(_):
        raise RuntimeError("finish failed")

    h = t.add([], finish, Payload())
    with pytest.raises(RuntimeError, match="finish failed"):
        t.synchronize(h)
    assert t.synchronize(h) is None


def test_numbers_stay_fresh_when_entries_are_refiled():
    t = table()
    done = set()
    for _ in range(3):  # later entries reuse the synchronized ones' storage
        hs = [t.add([], None, Payload()) for _ in range(4)]
        assert not done & set(hs)
        for h in hs:
            assert t.synchronize(h) is not None
        done |= set(hs)
    assert all(t.synchronize(h) is None for h in done)


def test_entries_outlive_any_number_of_later_ones():
    # Entries kept across many later ones (more than the table holds
    # side by side before it sets old ones aside), taken out of order,
    # or never synchronized, each stay their number's until synchronized.
    t = table()
    first = Payload()
    h_first = t.add([], None, first)
    kept = {}
    for i in range(70000):
        p = Payload()
        h = t.add([], None, p)
        if i % 9000 == 0:
            kept[h] = p
        else:
            assert t.synchronize(h) is p
    out_of_order = [t.add([], None, Payload()) for _ in range(3000)]
    for h in reversed(out_of_order):
        assert t.poll(h)
        assert t.synchronize(h) is not None
        assert t.synchronize(h) is None
    for h, p in kept.items():
        assert t.poll(h)
        assert t.synchronize(h) is p
        assert t.synchronize(h) is None
    assert t.synchronize(h_first) is first
    with pytest.raises(ValueError, match="unknown or already synchronized"):
        t.poll(h_first)


def test_enqueue_needs_a_bound_engine():
    np = pytest.importorskip("numpy")
    t = table()
    a = np.ones(4, dtype=np.float32)
    with pytest.raises(ValueError, match="not been initialized"):
        t.enqueue_one(0, a.__dlpack__(), a, None, "allreduce", "x", 1, 1.0,
                      1.0, 0, 0)
    with pytest.raises(TypeError):
        t.bind(Payload())
    with pytest.raises(TypeError, match="a started Engine"):
        t.bind(_core.Engine.__new__(_core.Engine))
    t.bind(None)  # what shutdown binds
    with pytest.raises(ValueError, match="not been initialized"):
        t.enqueue_one(0, a.__dlpack__(), a, None, "allreduce", "x", 1, 1.0,
                      1.0, 0, 0)


def test_enqueue_takes_capsules_and_dlpack_exporters_only():
    # Capsules are read in place; anything else goes through nanobind's
    # import, which takes objects with __dlpack__ (and then meets the
    # unbound engine) and refuses the rest, a consumed capsule included.
    np = pytest.importorskip("numpy")
    t = table()
    a = np.ones(4, dtype=np.float32)
    with pytest.raises(ValueError, match="not been initialized"):
        t.enqueue_one(0, a, a, None, "allreduce", "x", 1, 1.0, 1.0, 0, 0)
    for bad in (Payload(), "tensor", 3):
        with pytest.raises(TypeError, match="DLPack"):
            t.enqueue_one(0, bad, a, None, "allreduce", "x", 1, 1.0, 1.0, 0,
                          0)
    used = a.__dlpack__()
    np.from_dlpack(_Exporter(used))  # consumes it
    with pytest.raises(TypeError, match="DLPack"):
        t.enqueue_one(0, used, a, None, "allreduce", "x", 1, 1.0, 1.0, 0, 0)


class _Exporter:
    """Hands NumPy one given capsule."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


class _Recorder:
    """allreduce_async_function's export (through `export_with`) and
    fallback, recording what each was given."""

    def __init__(self, export_with=lambda x: x.__dlpack__()):
        self.export_with = export_with
        self.exported, self.fell_back = [], []

    def export(self, x):
        self.exported.append(x)
        return self.export_with(x)

    def fallback(self, *args):
        self.fell_back.append(args)
        return "fallback"

    def function(self, table, global_set):
        return _core.allreduce_async_function(table, self.export,
                                              self.fallback, global_set, 1)


def test_allreduce_async_function_files_or_falls_back():
    # The per-gradient form is exported and filed in C (here meeting the
    # unbound engine); every other form reaches the Python implementation
    # with the arguments as given and the defaults filled in.
    np = pytest.importorskip("numpy")
    calls = _Recorder()
    exported, fell_back = calls.exported, calls.fell_back
    everyone = Payload()
    f = calls.function(table(), everyone)
    assert f.__name__ == "allreduce_async_"
    for not_a_table in (Payload(), _core.HandleTable.__new__(_core.HandleTable)):
        with pytest.raises(TypeError, match="initialized HandleTable"):
            calls.function(not_a_table, everyone)
    a = np.ones(4, dtype=np.float32)
    filed = [dict(name="x"), dict(name="x", op=0),
             dict(name="ü", op=2, prescale_factor=2, postscale_factor=0.5),
             dict(name="x", process_set=everyone, average=None)]
    for kwargs in filed:
        with pytest.raises(ValueError, match="not been initialized"):
            f(a, **kwargs)
    with pytest.raises(ValueError, match="not been initialized"):
        f(a, None, "x", 1, 1.0, 1.0, everyone)
    assert len(exported) == len(filed) + 1 and not fell_back
    assert f(a) == "fallback"
    assert fell_back.pop() == (a, None, None, None, 1.0, 1.0, everyone)
    other = Payload()
    strided = np.ones((4, 4), dtype=np.float32)[:, 1]
    for args, kwargs in [((a,), dict(name="")), ((a,), dict(name=5)),
                         ((a,), dict(name="x", average=True)),
                         ((a,), dict(name="x", op="sum")),
                         ((a,), dict(name="x", op=2 ** 70)),
                         ((a,), dict(name="x", op=1.0)),
                         ((a,), dict(name="x", prescale_factor="2")),
                         ((a,), dict(name="x", postscale_factor=None)),
                         ((a,), dict(name="x", process_set=other)),
                         ((strided,), dict(name="x"))]:
        assert f(*args, **kwargs) == "fallback"
        got = fell_back.pop()
        want = dict(tensor=args[0], average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=everyone)
        want.update(kwargs)
        assert got == tuple(want.values()), (kwargs, got)
    assert exported[-1] is strided  # exported, found strided, passed on
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        f(a, name="x", bogus=1)
    # Arguments bind as Python binds them: a keyword built at run time (not
    # interned) still names its parameter; a parameter given twice, a
    # missing tensor or too many positional arguments are TypeErrors.
    built = "".join(["na", "me"])
    with pytest.raises(ValueError, match="not been initialized"):
        f(a, **{built: "x"})
    assert len(exported) == len(filed) + 3 and not fell_back
    with pytest.raises(TypeError, match="multiple values for argument 'name'"):
        f(a, None, "x", name="y")
    with pytest.raises(TypeError, match="missing required argument 'tensor'"):
        f(name="x")
    with pytest.raises(TypeError, match="at most 7 positional"):
        f(a, None, "x", 1, 1.0, 1.0, everyone, 0)
    assert f(tensor=a, average=True) == "fallback"
    assert fell_back.pop() == (a, True, None, None, 1.0, 1.0, everyone)
    assert not fell_back


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_DESCRIBE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)


class _Table(ctypes.Structure):
    """DLPack's exchange table: a versioned header, then five functions,
    the fourth describing a tensor object in a caller's DLTensor."""


_Table._fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                   ("older", ctypes.POINTER(_Table)),
                   ("allocator", ctypes.c_void_p),
                   ("managed_from", ctypes.c_void_p),
                   ("managed_to", ctypes.c_void_p), ("describe", _DESCRIBE),
                   ("work_stream", ctypes.c_void_p)]

_TABLE_NAME = b"dlpack_exchange_api"  # outlives every capsule naming it
_kept = []  # tables, shapes and functions the capsules point to


def _capsule(table, name=_TABLE_NAME):
    _kept.append(table)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(table), name, None)


def _tensor_type(table_attr):
    """A tensor type that exports through NumPy's __dlpack__ and carries
    `table_attr` as its exchange table."""
    np = pytest.importorskip("numpy")

    class Tensor:
        __dlpack_c_exchange_api__ = table_attr

        def __init__(self):
            self.array = np.ones(4, dtype=np.float32)
            self.shape = (ctypes.c_int64 * 1)(4)

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

    return Tensor


def _describing(result):
    """A describing function that fills in the tensor's array, or refuses
    it (`result` -1)."""

    def describe(obj, out):
        if result != 0:
            return -1
        d = _DLTensor.from_address(out)
        d.data = obj.array.ctypes.data
        d.device_type, d.device_id, d.ndim = 1, 0, 1
        d.code, d.bits, d.lanes = 2, 32, 1
        d.shape = ctypes.cast(obj.shape, ctypes.POINTER(ctypes.c_int64))
        d.strides = None
        d.byte_offset = 0
        return 0

    fn = _DESCRIBE(describe)
    _kept.append(fn)
    return fn


def test_allreduce_async_function_describes_through_the_exchange_table():
    # A tensor type's DLPack exchange table (a capsule on the type) is
    # looked up once and its describing function used in place of the
    # export; a table of another major version (unless it links a 1.x one),
    # without the function, under another name, not a capsule, or a
    # function that refuses the tensor leaves the export to do the work.
    calls = _Recorder()
    f = calls.function(table(), Payload())
    v1 = _Table(major=1, minor=3, describe=_describing(0))
    v2 = _Table(major=2, minor=0, older=ctypes.pointer(v1))
    described = [_tensor_type(_capsule(v1)), _tensor_type(_capsule(v2))]
    exporting = [
        _tensor_type(_capsule(_Table(major=2, minor=0,
                                     describe=_describing(0)))),
        _tensor_type(_capsule(_Table(major=1, minor=0))),
        _tensor_type(_capsule(_Table(major=1, minor=0,
                                     describe=_describing(0)),
                              name=b"other")),
        _tensor_type(7),
        _tensor_type(_capsule(_Table(major=1, minor=0,
                                     describe=_describing(-1)))),
    ]
    for kind in described + exporting:
        for _ in range(2):  # the second call finds the type known
            x = kind()
            with pytest.raises(ValueError, match="not been initialized"):
                f(x, name="x")
            assert calls.exported == ([x] if kind in exporting else [])
            calls.exported.clear()
    assert not calls.fell_back


def test_allreduce_async_function_describes_torch_tensors_in_place():
    # torch's tensors (and subclasses such as parameters) carry the
    # exchange table: the per-gradient call never exports them. A strided
    # one is described, found strided and passed on.
    torch = pytest.importorskip("torch")
    calls = _Recorder(torch.utils.dlpack.to_dlpack)
    f = calls.function(table(), Payload())
    for x in (torch.ones(4), torch.nn.Parameter(torch.ones(2, 3)),
              torch.ones((), dtype=torch.float64), torch.ones(0)):
        with pytest.raises(ValueError, match="not been initialized"):
            f(x, name="x")
    strided = torch.ones(4, 4)[:, 1]
    assert f(strided, name="x") == "fallback"
    assert [args[0] for args in calls.fell_back] == [strided]
    assert not calls.exported


def test_poll_and_synchronize_take_one_handle_number():
    # Plain C methods (no binding layer): the argument is checked by hand.
    np = pytest.importorskip("numpy")
    t = table()
    a, b, c = Payload(), Payload(), Payload()
    ha, hb, hc = (t.add([], None, p) for p in (a, b, c))
    assert t.poll(handle=ha) is True
    assert t.synchronize(handle=ha) is a
    assert t.synchronize(np.int64(hb)) is b  # any integer with __index__
    bound = t.synchronize  # as adapters export it
    assert bound(hc) is c
    for bad in (1.0, "1", None, 2 ** 70):
        for method in (t.poll, t.synchronize):
            with pytest.raises(TypeError, match="the handle must be an int"):
                method(bad)
    with pytest.raises(TypeError, match="takes one argument, the handle "
                                        r"\(0 given\)"):
        t.synchronize()
    with pytest.raises(TypeError, match=r"\(2 given\)"):
        t.poll(1, 2)
    with pytest.raises(TypeError,
                       match="unexpected keyword argument 'number'"):
        t.synchronize(number=1)
    with pytest.raises(TypeError):
        _core.HandleTable.synchronize(Payload(), 1)  # not a table
    bare = _core.HandleTable.__new__(_core.HandleTable)
    for method in (bare.poll, bare.synchronize):
        with pytest.raises(TypeError, match="never initialized"):
            method(0)
