"""The handle table behind upstream's integer handles (horovod._core's
HandleTable, src/python/handle_table.cc), in one process: what synchronize
returns, what stays referenced until then, and the answers for numbers it
does not hold. Engine-backed entries are covered by the multi-rank checks
(tests/python/workers/checks_collectives.py, checks_errors.py)."""

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


def test_enqueue_needs_a_bound_engine():
    np = pytest.importorskip("numpy")
    t = table()
    a = np.ones(4, dtype=np.float32)
    with pytest.raises(ValueError, match="not been initialized"):
        t.enqueue_one(0, a.__dlpack__(), a, None, "allreduce", "x", 1, 1.0,
                      1.0, 0, 0)
    with pytest.raises(TypeError):
        t.bind(Payload())
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


def test_allreduce_async_function_files_or_falls_back():
    # The per-gradient form is exported and filed in C (here meeting the
    # unbound engine); every other form reaches the Python implementation
    # with the arguments as given and the defaults filled in.
    np = pytest.importorskip("numpy")
    t = table()
    exported, fell_back = [], []

    def export(x):
        exported.append(x)
        return x.__dlpack__()

    def fallback(*args):
        fell_back.append(args)
        return "fallback"

    everyone = Payload()
    f = _core.allreduce_async_function(t, export, fallback, everyone, 1)
    assert f.__name__ == "allreduce_async_"
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
