"""Keras 3 (TensorFlow backend) training throughput on synthetic images:
Horovod's DistributedOptimizer under model.fit at np=1 and np=2, and
TensorFlow's own MultiWorkerMirroredStrategy (its collective ring over
gRPC) at np=2 against Horovod's DistributedGradientTape in the same custom
loop, on the same model and per-worker batch.

  horovodrun -np 2 python benchmarks/keras_synthetic.py --mode hvd
  horovodrun -np 2 python benchmarks/keras_synthetic.py --mode hvd-loop
  python benchmarks/keras_synthetic.py --mode mwms --np 2   # starts its workers

Prints TRAIN,<label>,<np>,<images/sec over all workers> (median of the
timed epochs' steady-state rates) for benchmarks/report.py.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def one_thread(tf):
    """Each worker computes on one thread, as the torch benchmark's
    --num-threads 1: with one intra-op thread TensorFlow's inter-op pool
    still keeps a second thread busy, so one worker used 1.1-1.4 of this
    machine's 2 cores and two workers could not double it."""
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def build_model(keras):
    return keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dense(10)])


class StepTimer:
    """Times batches after the first few of each epoch (tracing, warm-up)."""

    def __init__(self, keras, skip):
        outer = self

        class _Cb(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                if batch == skip:
                    outer.t0 = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                outer.rates.append((outer.steps - skip) /
                                   (time.perf_counter() - outer.t0))
        self.rates, self.t0, self.steps, self.callback = [], 0.0, 0, _Cb()


def data(np_, batch, steps, seed):
    import numpy as np
    rng = np.random.RandomState(seed)
    x = rng.rand(batch * steps, 32, 32, 3).astype(np.float32)
    y = rng.randint(0, 10, size=batch * steps)
    return x, y


def loop_rate(step, x, y, args):
    """Steps per second of a custom loop over the synthetic data: the median
    over epochs after the first, each timed after its first args.skip
    steps."""
    import tensorflow as tf
    rates = []
    for _ in range(args.epochs):
        for s in range(args.steps):
            if s == args.skip:
                t0 = time.perf_counter()
            lo = s * args.batch_size
            step(tf.constant(x[lo:lo + args.batch_size]),
                 tf.constant(y[lo:lo + args.batch_size]))
        rates.append((args.steps - args.skip) / (time.perf_counter() - t0))
    return statistics.median(rates[1:] or rates)


def run_hvd(args):
    import tensorflow as tf
    one_thread(tf)
    import keras
    import horovod.keras as hvd
    hvd.init()
    x, y = data(hvd.size(), args.batch_size, args.steps, hvd.rank())
    model = build_model(keras)
    model.compile(optimizer=hvd.DistributedOptimizer(
        keras.optimizers.SGD(0.01, momentum=0.9)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timer = StepTimer(keras, args.skip)
    timer.steps = args.steps
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs,
              verbose=0, callbacks=[
                  hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                  timer.callback])
    rate = statistics.median(timer.rates[1:] or timer.rates)
    if hvd.rank() == 0:
        total = rate * args.batch_size * hvd.size()
        print("Total img/sec on %d CPU(s): %.1f" % (hvd.size(), total))
        print("TRAIN,keras-hvd,%d,%.1f" % (hvd.size(), total), flush=True)
    hvd.shutdown()


def run_hvd_loop(args):
    """The custom loop of the MultiWorkerMirroredStrategy run, with
    Horovod's DistributedGradientTape instead of the strategy."""
    import tensorflow as tf
    one_thread(tf)
    import keras
    import horovod.tensorflow as hvd
    hvd.init()
    n = hvd.size()
    x, y = data(n, args.batch_size, args.steps, hvd.rank())
    model = build_model(keras)
    opt = keras.optimizers.SGD(0.01, momentum=0.9)
    model.build((None, 32, 32, 3))
    opt.build(model.trainable_variables)
    hvd.broadcast_variables(model.variables, root_rank=0)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    rate = loop_rate(step, x, y, args)
    if hvd.rank() == 0:
        total = rate * args.batch_size * n
        print("Total img/sec on %d CPU(s): %.1f" % (n, total))
        print("TRAIN,keras-hvd-loop,%d,%.1f" % (n, total), flush=True)
    hvd.shutdown()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_mwms(args):
    ports = [free_port() for _ in range(args.np)]
    workers = ["127.0.0.1:%d" % p for p in ports]
    procs = []
    for i in range(args.np):
        env = dict(os.environ)
        env["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers},
                                       "task": {"type": "worker",
                                                "index": i}})
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--mode", "mwms-worker",
             "--batch-size", str(args.batch_size), "--steps",
             str(args.steps), "--epochs", str(args.epochs), "--skip",
             str(args.skip)], env=env))
    sys.exit(max(p.wait() for p in procs))


def run_mwms_worker(args):
    """A custom loop under the strategy: Keras 3.15's model.fit does not run
    under MultiWorkerMirroredStrategy (it fails building the model from a
    reduced first batch), so the step is the one TensorFlow's guide writes
    by hand, with the same model, optimizer and per-worker batch."""
    import tensorflow as tf
    one_thread(tf)
    import keras
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    n = strategy.num_replicas_in_sync
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    x, y = data(n, args.batch_size, args.steps, index)
    with strategy.scope():
        model = build_model(keras)
        opt = keras.optimizers.SGD(0.01, momentum=0.9)
        model.build((None, 32, 32, 3))
        opt.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="none")

    @tf.function
    def step(xb, yb):
        def replica(xb, yb):
            with tf.GradientTape() as tape:
                per_example = loss_fn(yb, model(xb, training=True))
                loss = tf.nn.compute_average_loss(
                    per_example, global_batch_size=args.batch_size * n)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return strategy.run(replica, args=(xb, yb))

    rate = loop_rate(step, x, y, args)
    if index == 0:
        total = rate * args.batch_size * n
        print("Total img/sec on %d CPU(s): %.1f" % (n, total))
        print("TRAIN,keras-mwms,%d,%.1f" % (n, total), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", choices=["hvd", "hvd-loop", "mwms",
                                      "mwms-worker"],
                   required=True)
    p.add_argument("--np", type=int, default=2, help="mwms: workers")
    p.add_argument("--batch-size", type=int, default=32,
                   help="per worker")
    # Epochs of a few seconds each: this machine's slow phases last
    # seconds, and one caught in a short epoch moves its median.
    p.add_argument("--steps", type=int, default=100, help="per epoch")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--skip", type=int, default=5,
                   help="untimed batches at the start of each epoch")
    args = p.parse_args()
    {"hvd": run_hvd, "hvd-loop": run_hvd_loop, "mwms": launch_mwms,
     "mwms-worker": run_mwms_worker}[args.mode](args)


if __name__ == "__main__":
    main()
