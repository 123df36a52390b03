"""horovod.keras on the Keras backend named by KERAS_BACKEND (tensorflow,
torch or jax): model.fit at N ranks equals one process on the concatenated
batch, the callbacks' effects, load_model and errors (run by checks.py, one
pytest case per check and backend)."""

import os
import tempfile

import keras
import numpy as np

import horovod.keras as hvd
from expect import raises

hvd.init()
r, n = hvd.rank(), hvd.size()
ranks = list(range(n))
B, D, STEPS = 4, 5, 3
rng = np.random.RandomState(0)
X = rng.randn(STEPS * n * B, D).astype(np.float32)
Y = rng.randn(STEPS * n * B, 1).astype(np.float32)
# Rank r's share of every global batch of n*B rows.
MINE = np.concatenate([np.arange(s * n * B + r * B, s * n * B + (r + 1) * B)
                       for s in range(STEPS)])


def same(got, want, tol=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape or not np.allclose(got, want, atol=tol,
                                                  rtol=tol):
        raise AssertionError("%s != %s" % (got.ravel()[:6], want.ravel()[:6]))


def model(perturb=False):
    keras.utils.set_random_seed(1)
    m = keras.Sequential([keras.Input((D,)),
                          keras.layers.Dense(8, activation="tanh"),
                          keras.layers.Dense(1)])
    if perturb:  # different starting weights per rank
        for w in m.trainable_weights:
            w.assign(keras.ops.convert_to_numpy(w) + r)
    return m


def flat(ws):
    return np.concatenate([np.ravel(keras.ops.convert_to_numpy(w))
                           for w in ws])


def reference(optimizer, epochs=1):
    m = model()
    m.compile(optimizer=optimizer, loss="mse")
    m.fit(X, Y, batch_size=n * B, epochs=epochs, shuffle=False, verbose=0)
    return flat(m.trainable_weights)


def fit_distributed(optimizer, epochs=1, callbacks=(), jit_compile="auto",
                    **kw):
    m = model(perturb=True)
    m.compile(optimizer=hvd.DistributedOptimizer(optimizer, **kw), loss="mse",
              jit_compile=jit_compile)
    history = m.fit(X[MINE], Y[MINE], batch_size=B, epochs=epochs,
                    shuffle=False, verbose=0,
                    callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
                    + list(callbacks))
    return m, history


def check_fit_equals_single_process():
    want = reference(keras.optimizers.SGD(0.1, momentum=0.9), epochs=2)
    m, _ = fit_distributed(keras.optimizers.SGD(0.1, momentum=0.9), epochs=2)
    same(flat(m.trainable_weights), want)
    # Every rank ends with the same weights.
    for other in hvd.allgather_object(flat(m.trainable_weights)):
        same(other, want)


def check_multi_optimizer_reduces_before_handing_on():
    # A MultiOptimizer hands each variable's gradient on to the optimizer
    # the map gives it, whose steps the wrapper never sees: wrapped, it
    # reduces them as it receives them. Left unreduced, each rank trained
    # on its own gradients.
    def multi():
        return keras.optimizers.MultiOptimizer(keras.optimizers.OptimizerMap(
            keras.optimizers.SGD(0.1, momentum=0.9),
            {".*/bias": keras.optimizers.Adam(0.05)}))
    want = reference(multi(), epochs=2)
    m, _ = fit_distributed(multi(), epochs=2)
    for other in hvd.allgather_object(flat(m.trainable_weights)):
        same(other, want)


def check_fit_with_jit_compile():
    # torch compiles the train step with torch.compile, JAX with jax.jit;
    # TensorFlow's XLA cannot call Horovod's ops and says so.
    opt = keras.optimizers.SGD(0.1)
    if keras.backend.backend() == "tensorflow":
        raises(NotImplementedError, lambda: fit_distributed(
            opt, jit_compile=True), "cannot run under XLA", "rank %d" % r)
        return
    m, _ = fit_distributed(opt, jit_compile=True)
    same(flat(m.trainable_weights), reference(keras.optimizers.SGD(0.1)))


def check_fit_with_adam_groups_and_fp16():
    want = reference(keras.optimizers.Adam(0.01))
    m, _ = fit_distributed(keras.optimizers.Adam(0.01), groups=2)
    same(flat(m.trainable_weights), want)
    m, _ = fit_distributed(keras.optimizers.Adam(0.01),
                           compression=hvd.Compression.fp16)
    same(flat(m.trainable_weights), want, tol=1e-2)


def check_backward_passes_per_step_sums_the_passes():
    # Two local passes summed, then averaged over ranks: one process with
    # Keras's accumulation (which averages the passes) at twice the rate.
    want = reference(keras.optimizers.SGD(0.2, gradient_accumulation_steps=2),
                     epochs=2)
    m, _ = fit_distributed(keras.optimizers.SGD(0.1), epochs=2,
                           backward_passes_per_step=2)
    same(flat(m.trainable_weights), want)
    want = reference(keras.optimizers.SGD(0.1, gradient_accumulation_steps=2),
                     epochs=2)
    m, _ = fit_distributed(keras.optimizers.SGD(0.1), epochs=2,
                           backward_passes_per_step=2,
                           average_aggregated_gradients=True)
    same(flat(m.trainable_weights), want)


def check_partial_optimizer_keeps_local_layers_local():
    # One SGD step from equal weights: the shared layer moves by the
    # gradient of the global batch, the local one by this rank's own
    # gradient divided by the number of ranks (scale_local_gradients).
    lr = 0.5
    x, y = X[MINE][:B], Y[MINE][:B]

    def one_step(optimizer, xs, ys):
        m = model()
        m.compile(optimizer=optimizer, loss="mse")
        m.train_on_batch(xs, ys)
        return m

    m = model()
    m.compile(optimizer=hvd.PartialDistributedOptimizer(
        keras.optimizers.SGD(lr), local_layers=m.layers[-1]), loss="mse")
    m.train_on_batch(x, y)
    shared = one_step(keras.optimizers.SGD(lr), X[:n * B], Y[:n * B])
    local = one_step(keras.optimizers.SGD(lr / n), x, y)
    same(flat(m.layers[0].trainable_weights),
         flat(shared.layers[0].trainable_weights))
    same(flat(m.layers[-1].trainable_weights),
         flat(local.layers[-1].trainable_weights))
    gathered = hvd.allgather_object(flat(m.layers[-1].trainable_weights))
    assert not np.allclose(gathered[0], gathered[1]), "local layers agree"
    raises(ValueError, lambda: hvd.PartialDistributedOptimizer(
        keras.optimizers.SGD(lr), local_layers=["dense"]), "Keras layers")


def check_broadcast_callback_makes_weights_equal():
    m = model(perturb=True)
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.0)),
              loss="mse")
    m.fit(X[MINE][:B], Y[MINE][:B], batch_size=B, epochs=1, verbose=0,
          callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    # lr 0: the weights are rank 0's initial ones.
    same(flat(m.trainable_weights), flat(model().trainable_weights))


def check_metric_average_gives_equal_logged_metrics():
    m = model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.0)),
              loss="mse", metrics=["mae"])
    # Each rank fits a different slice, so raw metrics differ by rank.
    local = m.evaluate(X[MINE], Y[MINE], batch_size=B, verbose=0,
                       return_dict=True)
    h = m.fit(X[MINE], Y[MINE], batch_size=B, epochs=1, verbose=0,
              shuffle=False,
              callbacks=[hvd.callbacks.MetricAverageCallback()])
    logged = {k: v[-1] for k, v in h.history.items()}
    everyone = hvd.allgather_object(logged)
    for other in everyone:
        for k in ("loss", "mae"):
            same(other[k], everyone[0][k], tol=1e-6)
    locals_ = hvd.allgather_object(local)
    same(logged["mae"], np.mean([d["mae"] for d in locals_]), tol=1e-4)


def check_metric_average_with_a_metric_gone_to_nan_on_one_rank():
    # The ranks average the same keys whatever their values: a NaN or inf
    # on one rank is averaged in, not left out there (which would send the
    # ranks' metrics in different shapes and fail the epoch).
    cb = hvd.callbacks.MetricAverageCallback()
    logs = {"loss": float("nan") if r == n - 1 else 1.0,
            "mae": float("inf") if r == 0 else 2.0, "acc": np.float32(r),
            "note": "text"}
    cb.on_epoch_end(0, logs)
    assert np.isnan(logs["loss"]) and np.isinf(logs["mae"]), logs
    same(logs["acc"], np.mean(ranks))
    assert logs["note"] == "text", logs


class _LrLog(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.lrs = []

    def on_train_batch_begin(self, batch, logs=None):
        self.lrs.append(float(keras.ops.convert_to_numpy(
            self.model.optimizer.learning_rate)))


def check_warmup_follows_its_ramp():
    steps = STEPS
    log = _LrLog()
    m = model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(1.0)),
              loss="mse")
    warm = hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.4,
                                                    warmup_epochs=2)
    m.fit(X[MINE], Y[MINE], batch_size=B, epochs=3, verbose=0, shuffle=False,
          callbacks=[warm, log])
    want = [0.4 / n * ((e + b / steps) * (n - 1) / 2 + 1)
            for e in range(2) for b in range(steps)] + [0.4] * steps
    same(log.lrs, want, tol=1e-6)


def check_schedule_staircase_and_momentum_correction():
    log = _LrLog()
    m = model()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9))
    m.compile(optimizer=opt, loss="mse")
    sched = hvd.callbacks.LearningRateScheduleCallback(
        initial_lr=0.1, multiplier=lambda epoch: 10.0 ** -epoch,
        start_epoch=1)
    m.fit(X[MINE], Y[MINE], batch_size=B, epochs=3, verbose=0, shuffle=False,
          callbacks=[sched, log])
    same(log.lrs, [0.1] * STEPS + [0.01] * STEPS + [0.001] * STEPS, tol=1e-7)
    # Momentum correction rescales the buffers at a change of rate.
    before = flat(opt.momentums)
    from horovod._keras.callbacks import _set_lr
    _set_lr(opt, 0.0005, momentum_correction=True)
    same(flat(opt.momentums), before * 0.5, tol=1e-6)


def check_best_model_checkpoint_saves_on_rank_0_when_improved():
    path = os.path.join(tempfile.gettempdir(),
                        "hvd_best_%d.keras" % os.getppid())
    if r == 0 and os.path.exists(path):
        os.remove(path)
    m = model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)),
              loss="mse")
    best = hvd.callbacks.BestModelCheckpoint(monitor="loss", filepath=path)
    m.fit(X[MINE], Y[MINE], batch_size=B, epochs=3, verbose=0,
          callbacks=[hvd.callbacks.MetricAverageCallback(), best])
    hvd.allgather_object(None)  # rank 0 has saved
    if r == 0:
        assert os.path.exists(path)
        loaded = keras.models.load_model(path)
        same(flat(loaded.trainable_weights), flat(m.trainable_weights))
        os.remove(path)
    assert np.isfinite(best.best)


def check_loss_scaling_skips_and_applies_the_same_steps_everywhere():
    # Under the mixed_float16 policy compile wraps the distributed
    # optimizer in a LossScaleOptimizer; a user may wrap one instead. Only
    # rank 0's gradients overflow float16 at the first loss scales: every
    # rank skips those steps (halving its scale) and applies the later
    # ones, on the same gradients. Checked on each rank's own gradients,
    # rank 0 would skip the reduction that the others wait in.
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        for how in ("compile wraps", "wrapped", "wraps"):
            keras.utils.set_random_seed(1)
            m = keras.Sequential([keras.Input((D,)), keras.layers.Dense(8),
                                  keras.layers.Dense(1)])
            start = flat(m.trainable_weights)
            sgd = keras.optimizers.SGD(1e-4)
            opt = {"compile wraps": lambda: hvd.DistributedOptimizer(sgd),
                   "wrapped": lambda: keras.optimizers.LossScaleOptimizer(
                       hvd.DistributedOptimizer(sgd)),
                   "wraps": lambda: hvd.DistributedOptimizer(
                       keras.optimizers.LossScaleOptimizer(sgd))}[how]()
            m.compile(optimizer=opt, loss="mse")
            m.fit(X[MINE] * (4.0 if r == 0 else 1.0), Y[MINE],
                  batch_size=B, epochs=4, shuffle=False, verbose=0)
            scale = float(keras.ops.convert_to_numpy(
                m.optimizer.dynamic_scale))
            weights = flat(m.trainable_weights)
            assert scale < 2.0 ** 15, (how, scale)  # some steps skipped
            assert not np.allclose(weights, start), how  # some applied
            for w, sc in hvd.allgather_object((weights, scale)):
                same(w, weights, tol=1e-3)
                assert sc == scale, (how, sc, scale)
    finally:
        keras.config.set_dtype_policy(policy)


def check_load_model_rewraps_the_optimizer_with_its_state():
    path = os.path.join(tempfile.gettempdir(),
                        "hvd_model_%d.keras" % os.getppid())
    m, _ = fit_distributed(keras.optimizers.Adam(0.01))
    if r == 0:
        m.save(path)
    hvd.allgather_object(None)
    loaded = hvd.load_model(path)
    from horovod._keras import _DistributedOptimizer
    assert isinstance(loaded.optimizer, _DistributedOptimizer)
    assert isinstance(loaded.optimizer, keras.optimizers.Adam)
    same(int(keras.ops.convert_to_numpy(loaded.optimizer.iterations)), STEPS)
    # Training goes on in step on every rank.
    loaded.fit(X[MINE], Y[MINE], batch_size=B, epochs=1, verbose=0,
               shuffle=False)
    for other in hvd.allgather_object(flat(loaded.trainable_weights)):
        same(other, flat(loaded.trainable_weights))
    hvd.allgather_object(None)
    if r == 0:
        os.remove(path)


def check_value_collectives_on_backend_tensors():
    y = hvd.allreduce(np.full(3, float(r + 1), np.float32), op=hvd.Sum)
    same(keras.ops.convert_to_numpy(y), [sum(k + 1 for k in ranks)] * 3)
    g = hvd.allgather(np.full((2,), r, np.int32))
    same(keras.ops.convert_to_numpy(g), np.repeat(ranks, 2))
    b = hvd.broadcast(np.full(2, float(r), np.float32), root_rank=n - 1)
    same(keras.ops.convert_to_numpy(b), [n - 1] * 2)
    assert hvd.broadcast_object({"r": r}, root_rank=1) == {"r": 1}


def check_errors():
    raises(ValueError, lambda: hvd.DistributedOptimizer(object()), "object")
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        keras.optimizers.SGD(0.1), op=17), "unknown reduce op 17")
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        keras.optimizers.SGD(0.1), compression="fp16"),
        "compression must be a compressor")
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        keras.optimizers.SGD(0.1), op=hvd.Adasum), "Adasum")
    for passes in (0, 1.5):
        raises(ValueError, lambda: hvd.DistributedOptimizer(
            keras.optimizers.SGD(0.1), backward_passes_per_step=passes),
            "backward_passes_per_step must be an integer of at least 1, "
            "got %r" % passes)
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        keras.optimizers.SGD(0.1), gradient_predivide_factor=0.0),
        "gradient_predivide_factor must not be 0")
    # Accumulated passes would skip the reduction the loss scale needs
    # first; Keras's own accumulation on the inner optimizer works.
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1)),
        backward_passes_per_step=2), "backward_passes_per_step=2 with a "
        "LossScaleOptimizer (rank %d)" % r, "gradient_accumulation_steps")
    multi = keras.optimizers.MultiOptimizer(
        keras.optimizers.OptimizerMap(keras.optimizers.SGD(0.1)))
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        multi, backward_passes_per_step=3),
        "backward_passes_per_step=3 with a MultiOptimizer")
    raises(ValueError, lambda: hvd.DistributedOptimizer(multi).apply(
        [keras.ops.ones(2)]), "must already be built")  # Keras's error
    accumulating = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1),
                                            backward_passes_per_step=2)
    raises(ValueError, lambda: keras.optimizers.LossScaleOptimizer(
        accumulating), "backward_passes_per_step=2 (rank %d)" % r,
        "gradient_accumulation_steps")
    raises(ValueError, lambda: hvd.callbacks.BestModelCheckpoint(mode="up"),
           "mode")
    schedule = hvd.callbacks.LearningRateScheduleCallback
    for kwargs, said in (
            (dict(multiplier="x"), "multiplier must be a number or a "
             "function of the epoch, got 'x'"),
            (dict(initial_lr="0.1"), "initial_lr must be a number, got "
             "'0.1'"),
            (dict(start_epoch=3, end_epoch=1), "end_epoch (None: no end) not "
             "below start_epoch, got start_epoch=3 and end_epoch=1"),
            (dict(steps_per_epoch=0), "steps_per_epoch must be a positive "
             "integer, got 0")):
        raises(ValueError, lambda: schedule(**dict(
            dict(initial_lr=0.1, multiplier=0.5), **kwargs)), said)
    raises(ValueError, lambda: hvd.callbacks.LearningRateWarmupCallback(
        initial_lr=0.1, warmup_epochs=-1), "warmup_epochs must be a number "
        "of epochs, 0 or more, got -1")
