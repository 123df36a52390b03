"""Every collective, dtype and reduction op, checked against values each
rank can compute locally (run by checks.py, one pytest case per check)."""

import math
import time

import torch

import horovod.torch as hvd
from common import ALL_DTYPES, close

hvd.init()
r, n = hvd.rank(), hvd.size()
ranks = list(range(n))


def expected_reduce(vals, op, dtype):
    if dtype == torch.bool:
        return any(vals) if op in (hvd.Sum, hvd.Max) else all(vals)
    if op == hvd.Sum:
        return sum(vals)
    if op == hvd.Average:
        s = sum(vals) / n
        return math.trunc(s) if not dtype.is_floating_point else s
    if op == hvd.Min:
        return min(vals)
    if op == hvd.Max:
        return max(vals)
    return math.prod(vals)


def check_allreduce_every_dtype_and_op():
    for dtype in ALL_DTYPES:
        ops = [hvd.Sum, hvd.Min, hvd.Max, hvd.Product]
        if dtype != torch.bool:
            ops.append(hvd.Average)
        for op in ops:
            if dtype == torch.bool:
                mine, vals = (r % 2 == 0), [k % 2 == 0 for k in ranks]
            else:
                mine, vals = r + 1, [k + 1 for k in ranks]
            x = torch.full((17, 3), mine, dtype=dtype)
            y = hvd.allreduce(x, op=op, name="ar.%s.%d" % (dtype, op))
            want = torch.full((17, 3), expected_reduce(vals, op, dtype),
                              dtype=dtype)
            close(y, want, tol=1e-2)
            close(x, torch.full((17, 3), mine, dtype=dtype))  # input untouched


def check_allreduce_in_place_large():
    big = torch.arange(1_000_003, dtype=torch.float64) * (r + 1)
    hvd.allreduce_(big, op=hvd.Sum)
    close(big, torch.arange(1_000_003, dtype=torch.float64)
          * sum(k + 1 for k in ranks))



def check_allreduce_out_of_place_reads_the_input_where_it_lies():
    # Large enough for the staged shared-memory path and its blocks: the
    # result lands in a tensor of its own, the input stays as it was.
    total = sum(k + 1 for k in ranks)
    x = torch.arange(3_000_001, dtype=torch.float32) % 97 * (r + 1)
    y = hvd.allreduce(x, op=hvd.Average, name="oop.large")
    assert y.data_ptr() != x.data_ptr() and y.is_contiguous()
    close(y, torch.arange(3_000_001, dtype=torch.float32) % 97 * total / n)
    close(x, torch.arange(3_000_001, dtype=torch.float32) % 97 * (r + 1))
    # An input the caller lets go of at once is read all the same: the
    # handle keeps it alive until synchronize.
    h = hvd.allreduce_async(torch.full((1 << 20,), float(r + 1)), op=hvd.Sum,
                            name="oop.dropped")
    junk = torch.full((1 << 20,), -1.0)  # would take a freed input's memory
    close(hvd.synchronize(h), torch.full((1 << 20,), float(total)))
    del junk
    # A strided input, and one that requires grad.
    nc = (torch.ones(6, 4) * (r + 1))[:, ::2]
    close(hvd.allreduce(nc, op=hvd.Sum), torch.full((6, 2), float(total)))
    w = torch.full((5,), float(r + 1), requires_grad=True)
    close(hvd.allreduce(w, op=hvd.Sum, name="oop.leaf"),
          torch.full((5,), float(total)))
    assert w.grad is None and float(w[0]) == r + 1
    # The grouped form: a large tensor, a strided one and a float64 one,
    # each reduced into a tensor of its own, the inputs untouched.
    xs = [torch.arange(1_000_003, dtype=torch.float32) % 13 * (r + 1),
          (torch.ones(4, 6) * (r + 1))[:, 1::3],
          torch.full((7,), float(r + 1), dtype=torch.float64)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Sum, name="oop.group")
    close(outs[0], torch.arange(1_000_003, dtype=torch.float32) % 13 * total)
    close(outs[1], torch.full((4, 2), float(total)))
    close(outs[2], torch.full((7,), float(total), dtype=torch.float64))
    assert all(o.data_ptr() != x.data_ptr() for o, x in zip(outs, xs))
    close(xs[0], torch.arange(1_000_003, dtype=torch.float32) % 13 * (r + 1))
    close(xs[2], torch.full((7,), float(r + 1), dtype=torch.float64))


def check_allreduce_out_of_place_input_must_match_the_output():
    # Refused on every rank, naming both tensors and the rank, before
    # anything is submitted; the job goes on.
    from horovod.torch import mpi_ops
    out = torch.zeros(4)
    for source, what in ((torch.zeros(5), "float32 [5]"),
                         (torch.zeros(4, dtype=torch.float64), "float64 [4]")):
        try:
            mpi_ops._collectives.enqueue_one(
                mpi_ops._ALLREDUCE, mpi_ops._to_dlpack(out), out, "allreduce",
                "oop.mismatch", None, source=mpi_ops._to_dlpack(source))
            raise AssertionError("a mismatched input was accepted")
        except hvd.HorovodInvalidArgumentError as e:
            assert ("an out-of-place allreduce's input must match its output "
                    "(rank %d): input %s on CPU, output float32 [4] on CPU"
                    % (r, what)) in str(e), str(e)
    close(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.full((3,), n))

def check_allreduce_in_place_returns_the_tensor_itself():
    # Also for a leaf that requires grad (written as through a detached
    # view); the async form's handle returns the same object.
    w = torch.full((5,), float(r + 1), requires_grad=True)
    out = hvd.allreduce_(w, op=hvd.Sum, name="inplace.leaf")
    assert out is w
    assert w.requires_grad and w.grad_fn is None
    close(w.detach(), torch.full((5,), float(sum(k + 1 for k in ranks))))
    t = torch.ones(3) * (r + 1)
    h = hvd.allreduce_async_(t, op=hvd.Average, name="inplace.async")
    assert hvd.synchronize(h) is t
    close(t, torch.full((3,), sum(k + 1 for k in ranks) / n))
    assert hvd.synchronize(h) is None  # already synchronized, as upstream


def check_allreduce_async_in_place_forms_agree():
    # A named tensor on the global set with an int op (or none) and
    # numeric scales is filed in one C call; every other form goes through
    # the Python implementation. Each gives upstream's answer.
    import numpy as np
    total = sum(k + 1 for k in ranks)
    cases = [((), dict(name="forms.default"), total / n),
             ((), dict(name="forms.scaled", op=hvd.Sum, prescale_factor=2,
                       postscale_factor=0.5), total),
             ((None, "forms.positional", hvd.Sum, 1.0, 1.0,
               hvd.global_process_set), {}, total),
             ((), dict(name="forms.flag", average=False), total),
             ((), dict(name=7, op=hvd.Sum), total),
             ((), dict(op=hvd.Max), n),
             ((), dict(name="forms.numpy_scale", op=hvd.Sum,
                       postscale_factor=np.float64(0.5)), total / 2)]
    for args, kwargs, want in cases:
        t = torch.full((3,), float(r + 1))
        h = hvd.allreduce_async_(t, *args, **kwargs)
        assert hvd.synchronize(handle=h) is t
        close(t, torch.full((3,), float(want)))


def check_allreduce_in_place_non_contiguous():
    base = torch.ones(6, 4) * (r + 1)
    nc = base[:, ::2]
    assert not nc.is_contiguous()
    hvd.allreduce_(nc, op=hvd.Sum)
    close(nc, torch.full((6, 2), float(sum(k + 1 for k in ranks))))
    close(base[:, 1::2], torch.full((6, 2), float(r + 1)))
    # Named on the global set (allreduce_async_'s C path, which leaves
    # strides to the copying path): a slice and a transpose.
    named = (torch.ones(6, 4) * (r + 1))[:, 1::2]
    hvd.allreduce_(named, op=hvd.Sum, name="non_contiguous.slice")
    close(named, torch.full((6, 2), float(sum(k + 1 for k in ranks))))
    tr = (torch.arange(12.).reshape(3, 4) * (r + 1)).t()
    assert not tr.is_contiguous()
    hvd.allreduce_(tr, op=hvd.Sum, name="non_contiguous.t")
    close(tr, torch.arange(12.).reshape(3, 4).t() * sum(k + 1 for k in ranks))
    # A contiguous tail of a larger tensor: the reduction starts at its
    # offset, and the elements before it stay as they were.
    whole = torch.arange(8.) * (r + 1)
    tail = whole[3:]
    hvd.allreduce_(tail, op=hvd.Sum, name="offset.tail")
    close(whole, torch.cat([torch.arange(3.) * (r + 1),
                            torch.arange(3., 8.) * sum(k + 1 for k in ranks)]))


def _capsule(array, offset, ndim):
    """A DLPack capsule made by hand over `array` (float32, 1-D): its
    tensor starts `offset` elements in, through byte_offset, as exporters
    may write it; ndim as given. Returns (capsule, what must outlive it)."""
    import ctypes

    class Device(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int32), ("id", ctypes.c_int32)]

    class DType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                    ("lanes", ctypes.c_uint16)]

    class Managed(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", Device),
                    ("ndim", ctypes.c_int32), ("dtype", DType),
                    ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)),
                    ("byte_offset", ctypes.c_uint64),
                    ("manager_ctx", ctypes.c_void_p),
                    ("deleter", ctypes.c_void_p)]

    shape = (ctypes.c_int64 * 1)(len(array) - offset)
    m = Managed(array.ctypes.data, Device(1, 0), ndim, DType(2, 32, 1),
                shape, None, 4 * offset, None, None)
    name = b"dltensor"
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(m), name, None), (m, shape, name)


def check_allreduce_reads_dlpack_capsules_as_exporters_write_them():
    # The direct path reads capsules itself: a tensor starting at a byte
    # offset is reduced from there, and a malformed one is refused by name
    # on every rank, the job going on.
    import numpy as np
    from horovod.torch import mpi_ops
    a = np.arange(8, dtype=np.float32) * (r + 1)
    capsule, alive = _capsule(a, 3, 1)
    h = mpi_ops._handles.enqueue_one(mpi_ops._ALLREDUCE, capsule, a, None,
                                     "allreduce", "capsule.offset",
                                     int(hvd.Sum), 1.0, 1.0, 0, 0)
    assert hvd.synchronize(h) is a
    total = sum(k + 1 for k in ranks)
    assert a.tolist() == [float(i * (r + 1)) for i in range(3)] + \
        [float(i * total) for i in range(3, 8)]
    capsule, alive = _capsule(a, 0, -1)
    try:
        mpi_ops._handles.enqueue_one(mpi_ops._ALLREDUCE, capsule, a, None,
                                     "allreduce", "capsule.bad", int(hvd.Sum),
                                     1.0, 1.0, 0, 0)
        raise AssertionError("a negative ndim was accepted")
    except hvd.HorovodInvalidArgumentError as e:
        assert "malformed DLPack tensor (rank %d): ndim -1" % r in str(e)
    close(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), n))


def check_allreduce_scalar_and_empty():
    close(hvd.allreduce(torch.tensor(float(r)), op=hvd.Max),
          torch.tensor(float(n - 1)))
    close(hvd.allreduce(torch.zeros(0, 5)), torch.zeros(0, 5))


def check_allreduce_average_is_default_and_average_flag():
    close(hvd.allreduce(torch.full((2,), float(r))),
          torch.full((2,), sum(ranks) / n))
    close(hvd.allreduce(torch.full((2,), float(r)), average=False),
          torch.full((2,), float(sum(ranks))))


def check_allreduce_prescale_postscale():
    y = hvd.allreduce(torch.full((4,), float(r + 1)), op=hvd.Sum,
                      prescale_factor=2.0, postscale_factor=0.25)
    close(y, torch.full((4,), 2.0 * 0.25 * sum(k + 1 for k in ranks)))


def check_out_of_order_submission():
    names = ["ooo.%d" % i for i in range(6)]
    order = names if r % 2 == 0 else list(reversed(names))
    handles = {nm: hvd.allreduce_async(torch.full((3,), float(names.index(nm) + r)),
                                       name=nm, op=hvd.Sum)
               for nm in order}
    for nm in names:
        close(hvd.synchronize(handles[nm]),
              torch.full((3,), float(n * names.index(nm) + sum(ranks))))


def check_async_poll_synchronize():
    h = hvd.allreduce_async_(torch.ones(8), name="polled")
    while not hvd.poll(h):
        pass
    close(hvd.synchronize(h), torch.ones(8))
    # As upstream: a handle already synchronized gives None.
    assert hvd.synchronize(h) is None


def check_grouped_allreduce():
    outs = hvd.grouped_allreduce([torch.full((2,), float(r)),
                                  torch.full((3, 1), 1.0)],
                                 op=hvd.Sum, name="grp")
    close(outs[0], torch.full((2,), float(sum(ranks))))
    close(outs[1], torch.full((3, 1), float(n)))
    ts = [torch.full((5,), float(r)), torch.ones(2, dtype=torch.float64)]
    hvd.grouped_allreduce_(ts, op=hvd.Max)
    close(ts[0], torch.full((5,), float(n - 1)))


def check_allgather_uneven_every_dtype():
    for dtype in ALL_DTYPES:
        x = torch.full((r, 3), r % 2 if dtype == torch.bool else r, dtype=dtype)
        y = hvd.allgather(x, name="ag.%s" % dtype)
        want = torch.cat([torch.full((k, 3), k % 2 if dtype == torch.bool else k,
                                     dtype=dtype) for k in ranks])
        close(y, want)


def check_grouped_allgather():
    g = hvd.grouped_allgather([torch.full((1,), float(r)), torch.full((2, 2), r)])
    close(g[0], torch.tensor([float(k) for k in ranks]))
    close(g[1], torch.cat([torch.full((2, 2), k) for k in ranks]))


def check_broadcast_every_dtype():
    root = n - 1
    for dtype in ALL_DTYPES:
        x = torch.full((7,), (r % 2) if dtype == torch.bool else r + 1,
                       dtype=dtype)
        y = hvd.broadcast(x, root, name="bc.%s" % dtype)
        close(y, torch.full((7,), (root % 2) if dtype == torch.bool else root + 1,
                            dtype=dtype))
    x = torch.full((3,), float(r))
    hvd.broadcast_(x, 0)
    close(x, torch.zeros(3))


def check_broadcast_out_of_place_leaves_the_input():
    # Every rank's result is a tensor of its own with the root's values, and
    # the input is untouched. Off the root the result starts empty, not as
    # a copy: memory just freed, full of other values, must not show
    # through it.
    root = n - 1
    cases = (((3 << 20,), torch.full((3 << 20,), float(r + 1))),
             ((4, 6), torch.full((6, 4), float(r + 1)).t()))  # strided
    forms = (lambda x, nm: hvd.broadcast(x, root, name=nm),
             lambda x, nm: hvd.synchronize(hvd.broadcast_async(x, root,
                                                               name=nm)))
    for k, (shape, x) in enumerate(cases):
        before = x.clone()
        for form in forms:
            torch.full(shape, -7.0)  # freed at once, for the next to reuse
            y = form(x, "bc.oop.%d" % k)
            assert y.data_ptr() != x.data_ptr()
            assert y.is_contiguous() and tuple(y.shape) == shape, y.shape
            close(y, torch.full(shape, float(root + 1)))
            close(x, before)


def check_alltoall_with_and_without_splits():
    x = torch.cat([torch.full((d + 1, 2), 100 * r + d, dtype=torch.int32)
                   for d in ranks])
    y, recv = hvd.alltoall(x, splits=[d + 1 for d in ranks])
    close(y, torch.cat([torch.full((r + 1, 2), 100 * s + r, dtype=torch.int32)
                        for s in ranks]))
    assert recv.tolist() == [r + 1] * n, recv
    y, recv = hvd.alltoall(x, splits=torch.tensor([d + 1 for d in ranks]))
    assert recv.tolist() == [r + 1] * n, recv
    y = hvd.alltoall(torch.arange(2 * n, dtype=torch.float32) + 10 * r)
    close(y, torch.cat([torch.tensor([2.0 * r, 2.0 * r + 1]) + 10 * s
                        for s in ranks]))


def _rs_input():
    dim0 = 2 * n + 1
    x = torch.arange(dim0 * 2, dtype=torch.float32).reshape(dim0, 2) * (r + 1)
    counts = [dim0 // n + (1 if k < dim0 % n else 0) for k in ranks]
    start = sum(counts[:r])
    full = torch.arange(dim0 * 2, dtype=torch.float32).reshape(dim0, 2) \
        * sum(k + 1 for k in ranks)
    return x, full[start:start + counts[r]]


def check_reducescatter_uneven_sum_and_average():
    x, mine = _rs_input()
    close(hvd.reducescatter(x, op=hvd.Sum), mine)
    close(hvd.reducescatter(x), mine / n)  # Average by default


def check_grouped_reducescatter():
    x, mine = _rs_input()
    gy = hvd.grouped_reducescatter([x, x * 2], op=hvd.Sum)
    close(gy[0], mine)
    close(gy[1], 2 * mine)


def check_sparse_allreduce_returns_a_callable():
    sp = torch.sparse_coo_tensor(torch.tensor([[r, n]]), torch.tensor([1.0, 2.0]),
                                 (n + 1,))
    h = hvd.sparse_allreduce_async(sp, name="sparse", op=hvd.Sum)
    assert callable(h), type(h)
    out = h()
    assert out.is_sparse
    close(out.to_dense(), torch.tensor([1.0] * n + [2.0 * n]))
    avg = hvd.sparse_allreduce_async(sp, name="sparse.avg", op=hvd.Average)()
    close(avg.to_dense(), torch.tensor([1.0 / n] * n + [2.0]))


def check_broadcast_object_and_allgather_object():
    obj = hvd.broadcast_object({"rank": r, "list": [1, 2]} if r == 0 else None, 0)
    assert obj == {"rank": 0, "list": [1, 2]}, obj
    assert hvd.allgather_object(("r", r)) == [("r", k) for k in ranks]


def check_broadcast_parameters_state_dict_and_lists():
    m = torch.nn.Linear(3, 2)
    with torch.no_grad():
        for p in m.parameters():
            p.fill_(r)
    hvd.broadcast_parameters(m.state_dict(), root_rank=n - 1)
    assert all(bool((p == n - 1).all()) for p in m.parameters())
    ps = [torch.full((2,), float(r)), torch.full((1,), float(r))]
    hvd.broadcast_parameters(ps, root_rank=0)
    close(ps[0], torch.zeros(2))
    named = [("a", torch.full((2,), float(r)))]
    hvd.broadcast_parameters(named, root_rank=0)
    close(named[0][1], torch.zeros(2))
    # parameters() itself, a generator, as a list would be.
    with torch.no_grad():
        for p in m.parameters():
            p.fill_(r)
    hvd.broadcast_parameters(m.parameters(), root_rank=0)
    assert all(bool((p == 0).all()) for p in m.parameters())
    # Anything else that is not a tensor is refused on every rank before
    # anything is sent; the job goes on.
    for bad, shown in (([1, 2], "an entry is 1"),
                       ({"w": m.weight, "step": 3}, "'step' is 3"),
                       (5, "a dict or an iterable of tensors, got int")):
        try:
            hvd.broadcast_parameters(bad, root_rank=0)
        except ValueError as e:
            assert shown in str(e) and "(rank %d)" % r in str(e), str(e)
        else:
            raise AssertionError("broadcast_parameters took %r" % (bad,))
    hvd.broadcast_parameters(m.state_dict(), root_rank=0)


def check_metrics_count_the_work_between_two_snapshots():
    keys = {"cycles", "responses", "tensors", "bytes", "cache_hits",
            "cache_misses", "board_overdue", "idle_s", "negotiate_s",
            "bookkeeping_s", "copy_s", "transfer_s", "wait_s"}
    before = hvd.metrics()
    assert set(before) == keys, sorted(before)
    ts = [torch.ones(1000) for _ in range(4)]
    for step in range(5):
        # A late rank in the first two steps, so every rank waits at least
        # once (handles found complete at synchronize count no wait).
        if step == 1:
            before_late = hvd.metrics()["board_overdue"]
        if (step, r) in ((0, 0), (1, n - 1)):
            time.sleep(0.05)
        hs = [hvd.allreduce_async_(t, name="metrics.%d" % i)
              for i, t in enumerate(ts)]
        for h in hs:
            hvd.synchronize(h)
        if step == 1:
            late_overdue = hvd.metrics()["board_overdue"] - before_late
    after = hvd.metrics()
    delta = {k: after[k] - before[k] for k in keys}
    assert delta["tensors"] == 20, delta
    assert delta["bytes"] == 20 * 4000, delta
    assert 5 <= delta["responses"] <= 20, delta
    assert delta["transfer_s"] > 0 and delta["wait_s"] > 0, delta
    assert all(delta[k] >= 0 for k in keys), delta
    if r > 0:  # the same names every step: cached after the first
        assert delta["cache_hits"] == 16 and delta["cache_misses"] == 4, delta
    # In step 1, the late rank's offers followed the others' to rank 0 at
    # once, when there is a ready board (the others' waited out its
    # patience, cached from step 0 on).
    if r == n - 1:
        assert late_overdue == 0, late_overdue
    close(ts[0], torch.ones(1000))  # averaged


def check_metrics_grouped_tensors_hit_the_response_cache():
    before = hvd.metrics()
    ts = [torch.ones(10) for _ in range(3)]
    for step in range(5):
        hvd.grouped_allreduce_(ts, name="metrics.group", op=hvd.Sum)
    after = hvd.metrics()
    if r > 0:  # a group's members are named by slot from the second step
        hits = after["cache_hits"] - before["cache_hits"]
        misses = after["cache_misses"] - before["cache_misses"]
        assert (hits, misses) == (12, 3), (hits, misses)
    close(ts[2], torch.full((10,), float(n ** 5)))
