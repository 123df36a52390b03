"""horovod.tensorflow: every collective and dtype, eagerly and inside
tf.function, checked against values each rank computes locally (run by
checks.py, one pytest case per check)."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from adasum_reference import operand, reference
from expect import raises

hvd.init()
r, n = hvd.rank(), hvd.size()
ranks = list(range(n))
DTYPES = [tf.uint8, tf.int8, tf.int16, tf.int32, tf.int64, tf.float16,
          tf.bfloat16, tf.float32, tf.float64, tf.bool]
MODES = {"eager": lambda f: f, "function": tf.function}


def same(got, want, tol=1e-2):
    got = np.asarray(tf.cast(got, tf.float64) if got.dtype != tf.bool else got)
    want = np.asarray(want, dtype=got.dtype)
    if got.shape != want.shape:
        raise AssertionError("shape %s != %s" % (got.shape, want.shape))
    if not np.allclose(got, want, atol=tol, rtol=tol):
        raise AssertionError("%s != %s" % (got.ravel()[:8], want.ravel()[:8]))


def expected(vals, op, dtype):
    if dtype == tf.bool:
        return any(vals) if op in (hvd.Sum, hvd.Max) else all(vals)
    return {hvd.Sum: sum(vals), hvd.Min: min(vals), hvd.Max: max(vals),
            hvd.Product: int(np.prod(vals)),
            hvd.Average: (sum(vals) / n if dtype.is_floating
                          else int(sum(vals) / n))}[op]


def check_allreduce_every_dtype_op_and_mode():
    for mode, wrap in MODES.items():
        for dtype in DTYPES:
            ops = [hvd.Sum, hvd.Min, hvd.Max, hvd.Product]
            if dtype != tf.bool:
                ops.append(hvd.Average)
            for op in ops:
                if dtype == tf.bool:
                    mine, vals = r % 2 == 0, [k % 2 == 0 for k in ranks]
                else:
                    mine, vals = r + 1, [k + 1 for k in ranks]
                x = tf.cast(tf.fill([5, 3], mine), dtype)
                y = wrap(lambda t: hvd.allreduce(t, op=op))(x)
                assert y.dtype == dtype and y.shape == (5, 3), (y.dtype,
                                                                y.shape)
                same(y, np.full((5, 3), expected(vals, op, dtype)))
                same(x, np.full((5, 3), mine))  # the input is untouched


def check_allreduce_average_flag_and_scale_factors():
    x = tf.fill([4], float(r + 1))
    with np.testing.suppress_warnings() as sup:
        sup.filter(DeprecationWarning)
        same(hvd.allreduce(x, average=False), [sum(k + 1 for k in ranks)] * 4)
    y = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0,
                      postscale_factor=0.5)
    same(y, [sum(k + 1 for k in ranks)] * 4)
    try:
        hvd.allreduce(x, average=True, op=hvd.Sum)
    except ValueError:
        pass
    else:
        raise AssertionError("average= and op= together must fail")


def check_allreduce_leaves_its_input_alone():
    # The kernel writes a fresh output when it cannot reuse the input's
    # buffer (out of place), or reuses a buffer nobody else reads (inside a
    # function): either way the caller's tensor keeps its values.
    for count in (3, 300000):  # one-barrier path, block rounds
        x = tf.constant(np.arange(count, dtype=np.float32) % 7 + r)
        want = (np.arange(count) % 7) * n + sum(ranks)
        same(hvd.allreduce(x, op=hvd.Sum), want)
        same(x, np.arange(count) % 7 + r)
        doubled = tf.function(lambda t: hvd.allreduce(t * 2, op=hvd.Sum))(x)
        same(doubled, want * 2)
        same(x, np.arange(count) % 7 + r)


def check_large_results_held_while_more_are_made():
    # Large results land in buffers the engine keeps for the next result
    # of their size: one still held is never handed out again (eight held
    # at once, each made from other values, keep theirs), one let go is.
    count = 1 << 18  # 1 MiB of float32
    base = np.arange(count, dtype=np.float32) % 11
    for mode, wrap in MODES.items():
        call = wrap(lambda t: hvd.allreduce(t, op=hvd.Sum))
        held = []
        for k in range(4):
            x = tf.constant(base + k * 100 + r)
            held.append(call(x))
            held.append(call(x))  # a second result while the first is held
        for k in range(4):
            want = (base + k * 100) * n + sum(ranks)
            for y in held[2 * k:2 * k + 2]:
                same(y, want)
        del held
        for k in range(6):  # let go each time: the values stay right
            x = tf.constant(base - k + r)
            same(call(x), (base - k) * n + sum(ranks))


def check_allreduce_fp16_compression():
    x = tf.fill([3], 0.5 * (r + 1))
    for wrap in MODES.values():
        y = wrap(lambda t: hvd.allreduce(t, op=hvd.Sum,
                                         compression=hvd.Compression.fp16))(x)
        assert y.dtype == tf.float32
        same(y, [0.5 * sum(k + 1 for k in ranks)] * 3)


def check_allreduce_indexed_slices_is_gathered():
    values = tf.fill([2, 3], float(r + 1))
    slices = tf.IndexedSlices(values, tf.constant([r, r + 1]),
                              dense_shape=tf.constant([n + 1, 3]))
    out = hvd.allreduce(slices)  # Average
    assert isinstance(out, tf.IndexedSlices)
    same(out.indices, [i for k in ranks for i in (k, k + 1)])
    same(out.values, np.repeat([(k + 1) / n for k in ranks], 2)[:, None]
         * np.ones((1, 3)))


def check_grouped_allreduce():
    for wrap in MODES.values():
        xs = [tf.fill([k + 1], float(r + k)) for k in range(4)]
        ys = wrap(lambda *ts: hvd.grouped_allreduce(list(ts), op=hvd.Sum))(*xs)
        for k, y in enumerate(ys):
            same(y, [sum(j + k for j in ranks)] * (k + 1))


def check_allgather_every_dtype_and_mode():
    for mode, wrap in MODES.items():
        for dtype in DTYPES:
            x = tf.cast(tf.fill([r + 1, 2], r % 2 if dtype == tf.bool else r),
                        dtype)
            # Rows differ per rank, so tf.function traces without a fixed
            # first dimension.
            fn = wrap(lambda t: hvd.allgather(t))
            y = fn(x)
            want = np.concatenate([np.full((k + 1, 2), k % 2 if dtype == tf.bool
                                           else k) for k in ranks])
            assert y.dtype == dtype
            same(y, want)


def check_grouped_allgather():
    xs = [tf.fill([r + 1], float(r)), tf.fill([2, 2], r * 10)]
    ys = hvd.grouped_allgather(xs)
    same(ys[0], np.concatenate([np.full(k + 1, k) for k in ranks]))
    same(ys[1], np.concatenate([np.full((2, 2), 10 * k) for k in ranks]))


def check_broadcast_every_dtype_root_and_mode():
    for wrap in MODES.values():
        for dtype in DTYPES:
            for root in ranks:
                x = tf.cast(tf.fill([3, 2], r % 2 if dtype == tf.bool else r),
                            dtype)
                y = wrap(lambda t: hvd.broadcast(t, root))(x)
                same(y, np.full((3, 2), root % 2 if dtype == tf.bool
                                else root))


def check_broadcast_in_place_on_variables():
    vs = [tf.Variable(tf.fill([3], float(r))), tf.Variable([r, r + 1])]
    hvd.broadcast_(vs, root_rank=n - 1)
    same(vs[0], [n - 1.0] * 3)
    same(vs[1], [n - 1, n])


def check_broadcast_variables_eager_and_function():
    v = tf.Variable(tf.fill([4], float(r)))
    hvd.broadcast_variables([v], root_rank=1)
    same(v, [1.0] * 4)
    w = tf.Variable(tf.fill([2], float(r)))

    @tf.function
    def bcast():
        hvd.broadcast_variables([w], root_rank=0)
    bcast()
    same(w, [0.0, 0.0])


def check_alltoall_with_and_without_splits():
    for wrap in MODES.values():
        # Rank r sends k+1 rows to rank k.
        splits = [k + 1 for k in ranks]
        x = tf.reshape(tf.range(sum(splits) * 2, dtype=tf.float32) + 100 * r,
                       [sum(splits), 2])
        out, received = wrap(lambda t, s: hvd.alltoall(t, s))(
            x, tf.constant(splits, tf.int32))
        same(received, [r + 1] * n)
        start = sum(splits[:r])
        want = np.concatenate([
            (np.arange(sum(splits) * 2).reshape(-1, 2) + 100 * k)
            [start:start + r + 1] for k in ranks])
        same(out, want)
    even = tf.fill([n * 2], r)
    out, received = hvd.alltoall(even)
    same(out, np.repeat(ranks, 2))
    same(received, [2] * n)


def check_reducescatter_and_grouped():
    for wrap in MODES.values():
        x = tf.fill([2 * n + 1, 3], float(r + 1))
        y = wrap(lambda t: hvd.reducescatter(t, op=hvd.Sum))(x)
        rows = 3 if r == 0 else 2
        same(y, np.full((rows, 3), sum(k + 1 for k in ranks)))
    ys = hvd.grouped_reducescatter([tf.fill([n], float(r)),
                                    tf.fill([2 * n], 2.0 * r)])
    same(ys[0], [np.mean(ranks)])
    same(ys[1], [2 * np.mean(ranks)] * 2)


def check_join_barrier_and_topology_ops():
    assert hvd.join().numpy() in ranks
    hvd.barrier()

    @tf.function
    def topo():
        return (hvd.rank_op(), hvd.size_op(), hvd.local_rank_op(),
                hvd.local_size_op(), hvd.process_set_included_op())
    got = [int(t.numpy()) for t in topo()]
    assert got == [r, n, hvd.local_rank(), hvd.local_size(), 1], got
    assert hvd.mpi_built() is False and hvd.nccl_built() == 0


def check_function_closing_over_eager_tensors():
    # A tf.function that uses tensors made outside it: each is captured,
    # and unnamed collectives are named after the capture.
    x = tf.fill([2 * n], float(r + 1))
    total = float(sum(range(1, n + 1)))
    f = tf.function(lambda: (hvd.allreduce(x, op=hvd.Sum),
                             hvd.broadcast(x, 0), hvd.allgather(x),
                             hvd.reducescatter(x, op=hvd.Sum)))
    for _ in range(2):
        reduced, sent, gathered, scattered = f()
        assert np.allclose(reduced.numpy(), [total] * 2 * n), reduced
        assert np.allclose(sent.numpy(), [1.0] * 2 * n), sent
        assert gathered.shape == [2 * n * n], gathered.shape
        assert np.allclose(scattered.numpy(), [total] * 2), scattered


def check_named_and_unnamed_in_function_reuse_names():
    # A traced function submits the same names on every execution.
    @tf.function
    def step(x):
        return hvd.allreduce(x, op=hvd.Sum) + hvd.allreduce(x * 2, op=hvd.Sum,
                                                              name="twice")
    for i in range(5):
        same(step(tf.fill([2], float(r + i))),
             [3 * sum(k + i for k in ranks)] * 2)


def check_process_sets():
    even = hvd.add_process_set([k for k in ranks if k % 2 == 0])
    try:
        if even.included():
            y = hvd.allreduce(tf.constant([float(r)]), op=hvd.Sum,
                              process_set=even)
            same(y, [sum(k for k in ranks if k % 2 == 0)])
            g = tf.function(lambda t: hvd.allgather(t, process_set=even))(
                tf.constant([r]))
            same(g, [k for k in ranks if k % 2 == 0])
    finally:
        hvd.remove_process_set(even)


def check_objects():
    obj = {"rank": r, "data": list(range(r + 2))} if r == 1 else None
    got = hvd.broadcast_object(obj, root_rank=1)
    assert got == {"rank": 1, "data": [0, 1, 2]}, got
    fn = hvd.broadcast_object_fn(root_rank=0)
    assert fn(("x", r)) == ("x", 0)
    assert hvd.allgather_object({"r": r}) == [{"r": k} for k in ranks]


def check_adasum_eagerly_in_a_function_and_through_the_tape():
    x = tf.constant(operand(r, (5,)), tf.float32)
    fn = tf.function(lambda t: hvd.allreduce(t, op=hvd.Adasum,
                                             name="adasum.fn"))
    if n & (n - 1):
        raises(ValueError, lambda: hvd.allreduce(x, op=hvd.Adasum),
               "power-of-two", "rank %d" % r)
        raises(tf.errors.InvalidArgumentError, lambda: fn(x), "power-of-two")
        return
    want = reference([operand(k, (5,)) for k in ranks])
    same(hvd.allreduce(x, op=hvd.Adasum), want, 1e-5)
    same(fn(x), want, 1e-5)
    # d/dw sum(w * x_r) = x_r: the tape's gradient is their Adasum.
    w = tf.Variable(tf.zeros(5))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * x)
    tape = hvd.DistributedGradientTape(tape, op=hvd.Adasum)
    same(tape.gradient(loss, [w])[0], want, 1e-5)
