"""horovod.tensorflow gradients and training (run by checks.py, one pytest
case per check). Equivalence: N ranks x batch B give the same weights as
1 process x batch N*B."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from adasum_reference import operand, reference
from expect import raises

hvd.init()
r, n = hvd.rank(), hvd.size()
ranks = list(range(n))
B, D = 4, 5
rng = np.random.RandomState(0)
X = rng.randn(6, n * B, D).astype(np.float32)
Y = rng.randn(6, n * B, 1).astype(np.float32)


def same(got, want, tol=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape or not np.allclose(got, want, atol=tol,
                                                  rtol=tol):
        raise AssertionError("%s != %s" % (got.ravel()[:6], want.ravel()[:6]))


def grad_of(fn, x):
    x = tf.Variable(x)
    with tf.GradientTape() as tape:
        y = fn(x)
    return tape.gradient(y, x)


def check_allreduce_gradient():
    for op, scale in ((hvd.Sum, n), (hvd.Average, 1)):
        g = grad_of(lambda v: tf.reduce_sum(hvd.allreduce(v * (r + 1), op=op)),
                    tf.ones([3]))
        # d/dv sum(allreduce(v*(r+1))) = (r+1) * allreduce(ones)
        same(g, [(r + 1) * scale] * 3)


def check_allgather_gradient_eager_and_function():
    def loss(v):
        return tf.reduce_sum(hvd.allgather(v) * (r + 1))
    # Upstream: output gradient averaged over ranks, own rows kept.
    want = np.full((r + 1, 2), np.mean([k + 1 for k in ranks]))
    same(grad_of(loss, tf.ones([r + 1, 2])), want)

    @tf.function
    def traced(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = loss(x)
        return tape.gradient(y, x)
    same(traced(tf.ones([r + 1, 2])), want)


def check_broadcast_gradient():
    g = grad_of(lambda v: tf.reduce_sum(hvd.broadcast(v, 0) * (r + 1)),
                tf.ones([2]))
    want = np.mean([k + 1 for k in ranks]) if r == 0 else 0.0
    same(g, [want] * 2)


def check_alltoall_gradient():
    splits = [1] * n
    g = grad_of(lambda v: tf.reduce_sum(hvd.alltoall(v, splits)[0] *
                                        tf.constant([[k + 1.0] for k in
                                                     ranks])),
                tf.ones([n, 2]))
    # Row k goes to rank k, where it is weighted by (r + 1) of the sender.
    same(g, np.full((n, 2), r + 1.0))


def check_reducescatter_gradient():
    for op, scale in ((hvd.Sum, n), (hvd.Average, 1)):
        g = grad_of(lambda v: tf.reduce_sum(hvd.reducescatter(v, op=op)),
                    tf.ones([n, 3]))
        same(g, np.full((n, 3), scale))


def model():
    tf.keras.utils.set_random_seed(1)
    m = tf.keras.Sequential([tf.keras.Input((D,)),
                             tf.keras.layers.Dense(8, activation="tanh"),
                             tf.keras.layers.Dense(1)])
    m.build((None, D))
    return m


def weights(m):
    return np.concatenate([w.numpy().ravel() for w in m.trainable_weights])


def reference_weights(steps, lr=0.1):
    m = model()
    for s in range(steps):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((m(X[s]) - Y[s]) ** 2)
        grads = tape.gradient(loss, m.trainable_weights)
        for w, g in zip(m.trainable_weights, grads):
            w.assign_sub(lr * g)
    return weights(m)


def train_with_tape(steps, traced, lr=0.1, **kwargs):
    m = model()
    for w in m.trainable_weights:  # different starts: broadcast fixes them
        w.assign_add(tf.fill(w.shape, float(r)))
    hvd.broadcast_variables(m.variables, root_rank=0)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((m(x) - y) ** 2)
        tape = hvd.DistributedGradientTape(tape, **kwargs)
        grads = tape.gradient(loss, m.trainable_weights)
        for w, g in zip(m.trainable_weights, grads):
            w.assign_sub(lr * g)
    if traced:
        step = tf.function(step)
    for s in range(steps):
        step(X[s][r * B:(r + 1) * B], Y[s][r * B:(r + 1) * B])
    return weights(m)


def check_distributed_gradient_tape_equals_single_process():
    want = reference_weights(6)
    same(train_with_tape(6, traced=False), want)
    same(train_with_tape(6, traced=True), want)
    same(train_with_tape(6, traced=True, groups=2), want)
    same(train_with_tape(6, traced=False, gradient_predivide_factor=2.0),
         want)
    same(train_with_tape(6, traced=True, compression=hvd.Compression.fp16),
         want, tol=1e-2)


def check_wrapping_again_reduces_once():
    # A tape or an optimizer wrapped twice takes the second wrapper's
    # reduction only: averaged, not summed and then averaged.
    v = tf.Variable([1.0, 2.0])
    mean = np.full(2, np.mean([k + 1 for k in ranks]), np.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(v * (r + 1))
    twice = hvd.DistributedGradientTape(hvd.DistributedGradientTape(
        tape, op=hvd.Sum), op=hvd.Average)
    assert type(twice).__mro__[2] is type(tape), type(twice).__mro__
    same(twice.gradient(loss, [v])[0], mean)
    opt = hvd.DistributedOptimizer(hvd.DistributedOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1), op=hvd.Sum))
    (g, _), = opt.compute_gradients(lambda: tf.reduce_sum(v * (r + 1)),
                                    var_list=[v])
    same(g, mean)


def check_partial_tape_keeps_local_layer_local():
    m = model()
    x, y = X[0][r * B:(r + 1) * B], Y[0][r * B:(r + 1) * B]
    with tf.GradientTape(persistent=True) as tape:
        loss = tf.reduce_mean((m(x) - y) ** 2)
    local = m.layers[-1]
    plain = tape.gradient(loss, m.trainable_weights)
    ptape = hvd.PartialDistributedGradientTape(tape, local_layers=[local])
    got = ptape.gradient(loss, m.trainable_weights)
    # The shared layer is averaged: equal everywhere; the local one is this
    # rank's gradient scaled by 1/size.
    shared = hvd.allgather_object(got[0].numpy())
    for other in shared:
        same(other, shared[0])
    same(got[-1], plain[-1].numpy() / n)


def check_sparse_gradients_gather_or_densify():
    emb = tf.Variable(tf.ones([n + 2, 3]))
    for as_dense in (False, True):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.gather(emb, [r, r + 1]) * (r + 1))
        tape = hvd.DistributedGradientTape(tape, sparse_as_dense=as_dense)
        g = tape.gradient(loss, [emb])[0]
        assert isinstance(g, tf.IndexedSlices) != as_dense, type(g)
        dense = tf.convert_to_tensor(g).numpy()
        want = np.zeros((n + 2, 3))
        for k in ranks:
            want[k] += (k + 1) / n
            want[k + 1] += (k + 1) / n
        same(dense, want)


def check_many_variables_with_one_and_two_interop_threads():
    # A graph executor runs independent ops in any order on a small pool;
    # a step's gradients go to the engine as one unit, so no rank waits in
    # one gradient's collective while its peer waits in another's.
    for threads in (1, 2):
        graph = tf.Graph()
        with graph.as_default():
            vs = [tf.compat.v1.get_variable(
                "v%d" % i, initializer=tf.fill([i % 7 + 1], float(r)),
                use_resource=True) for i in range(40)]
            loss = tf.add_n([tf.reduce_sum(v * v) for v in vs])
            opt = hvd.DistributedOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.5))
            train = opt.minimize(loss)
            init = tf.compat.v1.global_variables_initializer()
        config = tf.compat.v1.ConfigProto(
            inter_op_parallelism_threads=threads,
            intra_op_parallelism_threads=1)
        with tf.compat.v1.Session(graph=graph, config=config) as sess:
            sess.run(init)
            for _ in range(3):
                sess.run(train)
            got = sess.run(vs)
        # grad = 2v averaged; v <- v - 0.5*2*mean(v) = v - mean(v)
        mean = np.mean(ranks)
        for v in got:
            same(v, np.full(v.shape, r - mean))


def check_v1_optimizer_with_hook_and_aggregation():
    graph = tf.Graph()
    with graph.as_default():
        w = tf.compat.v1.get_variable("w", initializer=tf.fill([3], float(r)),
                                      use_resource=True)
        x = tf.compat.v1.placeholder(tf.float32, [3])
        loss = tf.reduce_sum(w * x)
        opt = hvd.DistributedOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(1.0),
            backward_passes_per_step=2, average_aggregated_gradients=True)
        train = opt.minimize(loss)
        hook = hvd.BroadcastGlobalVariablesHook(0)
        with tf.compat.v1.train.MonitoredSession(
                session_creator=tf.compat.v1.train.ChiefSessionCreator(),
                hooks=[hook]) as sess:
            assert np.allclose(sess.run(w), 0.0)  # broadcast from rank 0
            sess.run(train, {x: [1.0 * (r + 1)] * 3})
            assert np.allclose(sess.run(w), 0.0)  # only accumulated
            sess.run(train, {x: [3.0 * (r + 1)] * 3})
            # mean over 2 passes and over ranks of (r+1)*[1,3] -> 2*mean(r+1)
            same(sess.run(w), [-2.0 * np.mean([k + 1 for k in ranks])] * 3)


def check_v1_optimizer_with_adasum_combines_weight_changes():
    make = lambda: hvd.DistributedOptimizer(  # noqa: E731
        tf.compat.v1.train.MomentumOptimizer(0.5, 0.9), op=hvd.Adasum)
    if n & (n - 1):
        raises(ValueError, make, "power-of-two", "rank %d" % r)
        return
    # d/dw sum(w * x_r) = x_r; a first momentum step changes w by -0.5 x_r.
    x = operand(r, (4,)).astype(np.float32)
    want = reference([-0.5 * operand(k, (4,)) for k in ranks])
    graph = tf.Graph()
    with graph.as_default():
        w = tf.compat.v1.get_variable("w", initializer=tf.zeros([4]),
                                      use_resource=True)
        train = make().minimize(tf.reduce_sum(w * x))
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(train)
            same(sess.run(w), want)
    w = tf.Variable(tf.zeros([4]))
    make().minimize(lambda: tf.reduce_sum(w * x), var_list=[w])
    same(w, want)


def check_sync_batch_norm_uses_every_rank():
    layer = hvd.SyncBatchNormalization(momentum=0.0, epsilon=0.0,
                                       center=False, scale=False)
    x = tf.constant(np.arange(4 * 2).reshape(4, 2) + 10.0 * r, tf.float32)
    y = layer(x, training=True)
    everything = np.concatenate([np.arange(8).reshape(4, 2) + 10.0 * k
                                 for k in ranks])
    mean, var = everything.mean(0), everything.var(0)
    same(layer.moving_mean.numpy(), mean, tol=1e-4)
    same(y, (x.numpy() - mean) / np.sqrt(var), tol=1e-4)
