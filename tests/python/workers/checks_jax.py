"""horovod.jax: every collective and dtype eagerly and under jax.jit,
gradients, pytrees, the optax DistributedOptimizer against single-process
training, and errors (run by checks.py, one pytest case per check)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

import horovod.jax as hvd
from adasum_reference import operand, reference
from expect import raises

hvd.init()
r, n = hvd.rank(), hvd.size()
ranks = list(range(n))
DTYPES = [jnp.uint8, jnp.int8, jnp.int16, jnp.int32, jnp.float16,
          jnp.bfloat16, jnp.float32, jnp.bool_]
MODES = {"eager": lambda f: f, "jit": jax.jit}


def same(got, want, tol=1e-2):
    got = np.asarray(got).astype(np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.allclose(got, want, atol=tol,
                                                  rtol=tol):
        raise AssertionError("%s %s != %s %s" % (got.shape, got.ravel()[:6],
                                                 want.shape,
                                                 want.ravel()[:6]))


def check_allreduce_every_dtype_op_and_mode():
    for wrap in MODES.values():
        for dtype in DTYPES:
            is_bool = dtype == jnp.bool_
            ops = [hvd.Sum, hvd.Min, hvd.Max] + ([] if is_bool else
                                                 [hvd.Average])
            for op in ops:
                mine = (r % 2 == 0) if is_bool else r + 1
                vals = [(k % 2 == 0) if is_bool else k + 1 for k in ranks]
                want = {hvd.Sum: any(vals) if is_bool else sum(vals),
                        hvd.Min: min(vals), hvd.Max: max(vals),
                        hvd.Average: np.mean(vals)}[op]
                if op == hvd.Average and not jnp.issubdtype(dtype,
                                                           jnp.floating):
                    want = int(np.mean(vals))
                x = jnp.full((4, 3), mine, dtype)
                y = wrap(lambda t: hvd.allreduce(t, op=op))(x)
                assert y.dtype == x.dtype and y.shape == (4, 3)
                same(y, np.full((4, 3), want))


def check_grouped_allreduce_and_scale_factors():
    for wrap in MODES.values():
        xs = [jnp.full((k + 1,), float(r + k)) for k in range(3)]
        ys = wrap(lambda *ts: hvd.grouped_allreduce(
            list(ts), op=hvd.Sum, prescale_factor=2.0,
            postscale_factor=0.25))(*xs)
        for k, y in enumerate(ys):
            same(y, [0.5 * sum(j + k for j in ranks)] * (k + 1))


def check_allgather_eager_uneven_and_jit_even():
    for dtype in DTYPES:
        v = r % 2 if dtype == jnp.bool_ else r
        y = hvd.allgather(jnp.full((r + 1, 2), v, dtype))
        assert y.dtype == dtype
        same(y, np.concatenate([np.full((k + 1, 2), k % 2 if dtype == jnp.bool_
                                        else k) for k in ranks]))
        z = jax.jit(lambda t: hvd.allgather(t))(jnp.full((2, 3), v, dtype))
        assert z.dtype == dtype
        same(z, np.concatenate([np.full((2, 3), k % 2 if dtype == jnp.bool_
                                        else k) for k in ranks]))


def check_jax_and_numpy_arrays_eagerly_and_unnamed_numbering():
    # JAX arrays go through the XLA handler eagerly, NumPy arrays through
    # NumPy: both reduce correctly at every size, bfloat16 included, leave
    # their input alone, and unnamed operations of both kinds, interleaved,
    # keep the ranks in step.
    for count in (3, 4096, 100000):
        for dtype in (jnp.float32, jnp.bfloat16):
            for make in (jnp.full, np.full):
                x = make((count,), r + 1, dtype)
                same(hvd.allreduce(x, op=hvd.Sum), [sum(ranks) + n] * count)
                same(hvd.broadcast(x, n - 1), [n] * count)
                same(x, [r + 1] * count)
    for k in range(3):
        same(hvd.allreduce(jnp.full(2, k + r), op=hvd.Max), [k + n - 1] * 2)
        same(hvd.allreduce(np.full(100000, k), op=hvd.Sum)[:2], [k * n] * 2)


def check_broadcast_every_root_and_pytrees():
    for wrap in MODES.values():
        for root in ranks:
            same(wrap(lambda t: hvd.broadcast(t, root))(jnp.full(3, r)),
                 [root] * 3)
    params = {"w": jnp.full((2, 2), float(r)), "b": [jnp.full(3, r),
                                                      jnp.array(r * 1.5)]}
    out = hvd.broadcast_parameters(params, root_rank=n - 1)
    same(out["w"], np.full((2, 2), n - 1))
    same(out["b"][0], [n - 1] * 3)
    same(out["b"][1], (n - 1) * 1.5)


def check_alltoall_and_reducescatter():
    splits = [k + 1 for k in ranks]
    x = jnp.arange(sum(splits)) + 100 * r
    out, received = hvd.alltoall(x, splits)
    start = sum(splits[:r])
    same(out, [100 * k + start + i for k in ranks for i in range(r + 1)])
    same(received, [r + 1] * n)
    out, received = jax.jit(lambda t: hvd.alltoall(t))(jnp.full(2 * n, r))
    same(out, np.repeat(ranks, 2))
    for wrap in MODES.values():
        y = wrap(lambda t: hvd.reducescatter(t, op=hvd.Sum))(
            jnp.ones((2 * n + 1, 2)) * (r + 1))
        same(y, np.full((3 if r == 0 else 2, 2), sum(k + 1 for k in ranks)))


def check_gradients_eager_and_jit():
    for wrap in MODES.values():
        g = wrap(jax.grad(lambda v: jnp.sum(hvd.allreduce(v * (r + 1),
                                                          op=hvd.Sum))))(
            jnp.ones(3))
        same(g, [(r + 1) * n] * 3)
        g = wrap(jax.grad(lambda v: jnp.sum(hvd.allgather(v) * (r + 1))))(
            jnp.ones((2, 2)))
        same(g, np.full((2, 2), np.mean([k + 1 for k in ranks])))
        g = wrap(jax.grad(lambda v: jnp.sum(hvd.broadcast(v, 0) * (r + 1))))(
            jnp.ones(2))
        same(g, [np.mean([k + 1 for k in ranks]) if r == 0 else 0.0] * 2)
        g = wrap(jax.grad(lambda v: jnp.sum(hvd.reducescatter(v))))(
            jnp.ones((n, 2)))
        same(g, np.ones((n, 2)))


def check_vmap_over_allreduce_and_broadcast():
    # Each rank's batch is reduced element by element, whichever axis vmap
    # maps; an operand vmap does not map comes out broadcast along it.
    x = jnp.arange(6.0).reshape(2, 3) * (r + 1)
    total = np.arange(6.0).reshape(2, 3) * sum(k + 1 for k in ranks)
    for wrap in MODES.values():
        same(wrap(jax.vmap(lambda v: hvd.allreduce(v, op=hvd.Sum)))(x), total)
        same(wrap(jax.vmap(lambda v: hvd.allreduce(v, op=hvd.Sum),
                           in_axes=1))(x), total.T)
        same(wrap(jax.vmap(lambda v: hvd.broadcast(v, n - 1)))(x),
             np.arange(6.0).reshape(2, 3) * n)
        a, b = wrap(jax.vmap(lambda u, v: hvd.grouped_allreduce(
            [u, v], op=hvd.Sum), in_axes=(0, None)))(x, jnp.ones(2))
        same(a, total)
        same(b, np.full((2, 2), n))
        same(wrap(jax.vmap(jax.grad(lambda v: jnp.sum(hvd.allreduce(
            v * (r + 1), op=hvd.Sum)))))(x), np.full((2, 3), (r + 1) * n))


def check_vmap_over_allgather_alltoall_and_reducescatter():
    # Each batch element is gathered, exchanged or scattered by itself,
    # whichever axis vmap maps and however deep vmaps nest.
    x = jnp.arange(2.0 * 2 * n).reshape(2, 2 * n) + 100 * r
    rows = [np.arange(2.0 * 2 * n).reshape(2, 2 * n) + 100 * k for k in ranks]
    gathered = np.concatenate(rows, axis=1)
    mine = slice(2 * r, 2 * r + 2)
    for wrap in MODES.values():
        same(wrap(jax.vmap(hvd.allgather))(x), gathered)
        same(wrap(jax.vmap(hvd.allgather, in_axes=1))(x.T), gathered)
        same(wrap(jax.vmap(jax.vmap(hvd.allgather)))(x.reshape(2, n, 2)),
             np.stack([np.concatenate([row.reshape(2, n, 2)[i]
                                       for row in rows], axis=1)
                       for i in range(2)]))
        out, received = wrap(jax.vmap(hvd.alltoall))(x)
        same(out, np.concatenate([row[:, mine] for row in rows], axis=1))
        same(received, np.full((2, n), 2))
        same(wrap(jax.vmap(lambda v: hvd.reducescatter(v, op=hvd.Sum)))(x),
             sum(rows)[:, mine])
        # Gradients under vmap: allgather's is averaged and sliced back.
        same(wrap(jax.vmap(jax.grad(lambda v: jnp.sum(
            hvd.allgather(v) * (r + 1)))))(x),
             np.full((2, 2 * n), np.mean([k + 1 for k in ranks])))
    # Ranks that batch different sizes send different shapes: refused.
    raises(Exception, lambda: jax.vmap(hvd.allgather)(
        jnp.ones((r + 1, 2))).block_until_ready(), "Mismatched allgather")
    same(hvd.allreduce(jnp.ones(2), op=hvd.Sum), [n] * 2)  # still working


def check_collectives_in_jit_run_even_when_unused():
    # The allreduce's result is dropped: it must still run on this rank, or
    # the peers (which use it) would wait for ever.
    @jax.jit
    def step(x):
        unused = hvd.allreduce(x, op=hvd.Sum, name="maybe_unused")  # noqa
        return x + 1
    if r == 0:
        step(jnp.ones(2)).block_until_ready()
    else:
        y = hvd.allreduce(jnp.ones(2), op=hvd.Sum, name="maybe_unused")
        same(y, [n] * 2)


def mlp_init():
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    return {"w1": jax.random.normal(k1, (5, 8)) * 0.3, "b1": jnp.zeros(8),
            "w2": jax.random.normal(k2, (8, 1)) * 0.3, "b2": jnp.zeros(1)}


def loss_fn(p, x, y):
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)


def check_distributed_optimizer_equals_single_process():
    B = 4
    rng = np.random.RandomState(0)
    X = rng.randn(5, n * B, 5).astype(np.float32)
    Y = rng.randn(5, n * B, 1).astype(np.float32)

    def train(tx, shard):
        p = mlp_init()
        if shard:  # different starts: broadcast fixes them
            p = jax.tree_util.tree_map(lambda a: a + r, p)
            p = hvd.broadcast_parameters(p, 0)
        s = tx.init(p)

        @jax.jit
        def step(p, s, x, y):
            g = jax.grad(loss_fn)(p, x, y)
            u, s = tx.update(g, s, p)
            return optax.apply_updates(p, u), s
        for i in range(5):
            x, y = (X[i][r * B:(r + 1) * B], Y[i][r * B:(r + 1) * B]) \
                if shard else (X[i], Y[i])
            p, s = step(p, s, x, y)
        return p
    want = train(optax.adam(0.05), False)
    got = train(hvd.DistributedOptimizer(optax.adam(0.05)), True)
    for k in want:
        same(got[k], want[k], tol=1e-5)


def check_wrapping_again_reduces_once():
    # The second wrapper's reduction replaces the first's (averaged, not
    # summed and then averaged), with or without accumulation.
    for passes in (1, 2):
        tx = hvd.DistributedOptimizer(hvd.DistributedOptimizer(
            optax.sgd(1.0), op=hvd.Sum), op=hvd.Average,
            backward_passes_per_step=passes)
        p = {"w": jnp.ones(2)}
        s = tx.init(p)
        for _ in range(passes):
            u, s = tx.update({"w": jnp.full(2, r + 1.0)}, s, p)
        mean = passes * np.mean([k + 1 for k in ranks])
        same(optax.apply_updates(p, u)["w"], np.full(2, 1.0 - mean))


def check_gradients_of_integer_inputs_pass_through():
    # jax.grad(allow_int=True) gives integer leaves float0 gradients, which
    # hold no values: they are kept, the others reduced, eagerly and in jit.
    params = {"w": jnp.ones(3), "steps": jnp.array(2)}
    g = jax.grad(lambda p: jnp.sum(p["w"] * p["steps"]) * (r + 1),
                 allow_int=True)(params)
    for wrap in MODES.values():
        out = wrap(hvd.allreduce_gradients)(g)
        assert out["steps"].dtype == jax.dtypes.float0, out["steps"].dtype
        same(out["w"], np.full(3, 2 * np.mean([k + 1 for k in ranks])))


def check_errors_name_value_and_rank():
    raises(hvd.HorovodInternalError,
           lambda: hvd.allreduce(jnp.ones(r + 1), name="shape"),
           "Mismatched allreduce tensor shapes")
    raises(ValueError, lambda: hvd.allreduce(jnp.ones(2, jnp.complex64)),
           "dtype", "rank %d" % r)
    # What is not an array, or of a dtype the engine does not carry, is
    # named (not answered with the binding's signature).
    for op in (hvd.allreduce, hvd.allgather, hvd.reducescatter):
        raises(TypeError, lambda: op({"w": jnp.ones(2)}),
               "%s takes arrays, got dict (rank %d)" % (op.__name__, r))
        raises(ValueError, lambda: op(np.ones(2, np.complex64)),
               "unsupported tensor dtype complex64 (rank %d)" % r)
    raises(ValueError, lambda: hvd.allgather(np.ones(2, np.uint16)),
           "unsupported tensor dtype uint16 (rank %d)" % r)
    for wrap in MODES.values():  # refused before jit computes shapes
        for op in (hvd.allgather, hvd.alltoall, hvd.reducescatter):
            raises(ValueError, lambda: wrap(op)(jnp.array(1.0)),
                   "%s needs an array with at least one dimension, got a "
                   "scalar (rank %d)" % (op.__name__, r))
    raises(ValueError, lambda: jax.jit(lambda t: hvd.alltoall(t, [1] * n))(
        jnp.ones(n)), "even splits", "rank %d" % r)
    raises(ValueError, lambda: hvd.alltoall(jnp.ones(2), [0.5, 1.5]),
           "integers")
    raises(ValueError, lambda: hvd.allreduce_gradients(
        {"w": jnp.ones(2)}, gradient_predivide_factor=0.0),
        "gradient_predivide_factor must not be 0")
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        optax.sgd(0.1), op=17), "unknown reduce op 17")
    raises(ValueError, lambda: hvd.DistributedOptimizer("sgd"),
           "DistributedOptimizer wraps an optax GradientTransformation, got "
           "str")
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        optax.sgd(0.1), backward_passes_per_step=1.5),
        "backward_passes_per_step must be an integer of at least 1, got 1.5")
    for wrap in MODES.values():  # eagerly and in jit
        raises(Exception, lambda: wrap(lambda t: hvd.allreduce(
            t, op=99, name="badop"))(jnp.ones(2)).block_until_ready(),
            "unknown reduce op 99", "rank %d" % r)
        # Ints past int's range are refused as given, not narrowed onto a
        # root or an op that exists (2^32 + 1 would wrap onto 1).
        raises(Exception, lambda: wrap(lambda t: hvd.broadcast(
            t, root_rank=2**32 + 1))(jnp.ones(2)).block_until_ready(),
            "root rank %d is out of range" % (2**32 + 1), "rank %d" % r)
        raises(Exception, lambda: wrap(lambda t: hvd.allreduce(
            t, op=2**32 + 1))(jnp.ones(2)).block_until_ready(),
            "reduce op %d is out of range" % (2**32 + 1), "rank %d" % r)
        # Numbers of the wrong kind, not truncated (int() takes 1.5 as 1).
        raises(TypeError, lambda: wrap(lambda t: hvd.broadcast(t, 1.5))(
            jnp.ones(2)), "root rank must be an integer, got 1.5",
            "rank %d" % r)
        raises(TypeError, lambda: wrap(lambda t: hvd.broadcast_parameters(
            {"w": t}, root_rank=0.0))(jnp.ones(2)),
            "root rank must be an integer, got 0.0")
        raises(TypeError, lambda: wrap(lambda t: hvd.allreduce(t, op=1.0))(
            jnp.ones(2)), "reduce op must be an integer, got 1.0")
        raises(TypeError, lambda: wrap(lambda t: hvd.reducescatter(
            t, prescale_factor="2"))(jnp.ones(2)),
            "prescale factor must be a number, got '2'")
    same(hvd.broadcast(jnp.full(2, float(r)), np.int64(n - 1)), [n - 1] * 2)
    same(hvd.allreduce(jnp.ones(2), op=hvd.Sum), [n] * 2)  # still working


def check_input_one_rank_refuses_fails_the_peers_eagerly():
    # Rank 0 refuses its input before the engine sees it; the others fail
    # with its reason instead of waiting, and the job goes on.
    x = np.ones(2 * n, np.float32)
    for op, bad, said in (
            (hvd.allgather, {"w": 1}, "allgather takes arrays, got dict"),
            (hvd.allgather, np.float32(1), "got a scalar"),
            (hvd.reducescatter, np.ones(2 * n, np.complex64),
             "unsupported tensor dtype complex64")):
        if r == 0:
            raises(Exception, lambda: op(bad), said, "rank 0")
        else:
            raises(hvd.HorovodInternalError, lambda: op(x),
                   "was refused by rank 0: ", said)
        same(hvd.allgather(np.full(1, r)), ranks)


def check_ranks_apart_in_jit_fail_fast_after_object_collectives():
    # After the main thread's own collectives, ranks blocked apart inside
    # jitted computations are found stuck by the deadlock check (as
    # TensorFlow's functions are; not by the stall check, minutes later).
    import time
    assert hvd.broadcast_object(r + 5, 0) == 5
    assert hvd.allgather_object(r) == ranks
    apart = jax.jit(lambda x: hvd.allreduce(x, name="apart.%d" % r))
    start = time.time()
    raises(Exception, lambda: apart(jnp.ones(2)).block_until_ready(),
           "can never match", "apart.0", "apart.1")
    assert time.time() - start < 2.5, time.time() - start
    same(hvd.allgather(np.full(1, r)), ranks)


def check_shutdown_and_init_again():
    # The XLA handler lets go of the engine at shutdown and binds the next.
    f = jax.jit(lambda t: hvd.allreduce(t, op=hvd.Sum, name="again"))
    x = jnp.ones(2)
    same(f(x), [n] * 2)
    hvd.shutdown()
    raises(ValueError, lambda: hvd.allreduce(x), "has not been initialized")
    raises(Exception, lambda: f(x).block_until_ready(),
           "has not been initialized")
    hvd.init()
    same(f(x), [n] * 2)
    same(hvd.allreduce(x, op=hvd.Sum), [n] * 2)


def check_adasum_eagerly_in_jit_and_for_gradients():
    x = jnp.asarray(operand(r, (5,)), jnp.float32)
    if n & (n - 1):
        raises(ValueError, lambda: hvd.allreduce(x, op=hvd.Adasum),
               "power-of-two", "rank %d" % r)
        return
    want = reference([operand(k, (5,)) for k in ranks])
    for wrap in MODES.values():
        same(wrap(lambda t: hvd.allreduce(t, op=hvd.Adasum))(x), want, 1e-5)
    grads = hvd.allreduce_gradients({"w": x}, op=hvd.Adasum)
    same(grads["w"], want, 1e-5)
