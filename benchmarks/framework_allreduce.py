"""hvd.allreduce from TensorFlow or JAX, measured with the same method and
RESULT format as py_allreduce.py (the horovod.torch path), so the three
frameworks sit side by side in one table.

  horovodrun -np 2 python benchmarks/framework_allreduce.py --framework tensorflow [--jit]
  horovodrun -np 2 python benchmarks/framework_allreduce.py --framework jax [--jit]

--jit compiles the call: tf.function (without XLA) for TensorFlow, jax.jit for
JAX.

Per size: 3 warm-up calls, doubling calibration until a batch takes >= 10 ms,
one exact correctness check, then trials of `iters` back-to-back calls after
a barrier (trial time = max over ranks); median per call, busbw =
bytes/median*2(n-1)/n. Each call returns the reduced array, materialized.
"""
import argparse
import statistics
import sys
import time

import numpy as np

from horovod.common.ops import Max, OpType, process_collectives

DEFAULT_SIZES = [4, 64, 1024, 16 << 10, 256 << 10, 1 << 20, 4 << 20,
                 16 << 20, 64 << 20]


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s[-1].upper() in mult:
        return int(float(s[:-1]) * mult[s[-1].upper()])
    return int(s)


def max_all(value):
    core = process_collectives()
    a = np.array([value], dtype=np.float64)
    core.synchronize(core.enqueue(OpType.allreduce, [a], "allreduce",
                                  "bench.max", lambda _: None, reduce_op=Max))
    return float(a[0])


def framework(name, jit):
    """(hvd module, make(pattern ndarray) -> input, call(x) -> output,
    to_numpy, version)."""
    if name == "tensorflow":
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(1)
        import horovod.tensorflow as hvd

        def call(x):
            return hvd.allreduce(x, op=hvd.Sum, name="bench.x")
        if jit:
            call = tf.function(call)
        return (hvd, tf.constant, call, lambda y: y.numpy(),
                "tensorflow " + tf.__version__ + (" function" if jit else ""))
    import jax
    import jax.numpy as jnp
    import horovod.jax as hvd

    def call(x):
        return hvd.allreduce(x, op=hvd.Sum, name="bench.x")
    if jit:
        call = jax.jit(call)
    return (hvd, jnp.asarray, lambda x: call(x).block_until_ready(),
            np.asarray, "jax " + jax.__version__ + (" jit" if jit else ""))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--framework", choices=["tensorflow", "jax"],
                   required=True)
    p.add_argument("--jit", action="store_true",
                   help="inside tf.function or jax.jit")
    p.add_argument("-s", default=None, help="sizes in bytes, K/M/G suffixes")
    p.add_argument("-b", type=float, default=1.5, help="seconds per size")
    p.add_argument("-l", default=None, help="label")
    args = p.parse_args()
    label = args.l or ("hvd-%s%s" % (
        "tf" if args.framework == "tensorflow" else "jax",
        "-jit" if args.jit else ""))
    sizes = [parse_size(x) for x in args.s.split(",")] if args.s else \
        DEFAULT_SIZES
    hvd, make, call, to_numpy, version = framework(args.framework, args.jit)
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    if rank == 0:
        print(f"# {label} np={n} budget={args.b:.2f}s {version} "
              f"hvd.allreduce (out of place)", flush=True)
    for requested in sizes:
        count = max(1, requested // 4)
        nbytes = count * 4
        pattern = (np.arange(count) % 7 + 1).astype(np.float32)
        x = make(pattern * float(rank + 1))
        for _ in range(3):
            call(x)
        calls = 1
        while True:
            hvd.barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                call(x)
            elapsed = max_all(time.perf_counter() - t0)
            if elapsed >= 0.01 or calls >= 1 << 20:
                one = elapsed / calls
                break
            calls *= 2
        y = to_numpy(call(x))
        bad = max_all(float(np.sum(y != pattern * float(n * (n + 1) // 2))))
        iters = min(100000, int(0.02 / max(one, 1e-9)) + 1)
        trials = min(50, max(5, int(args.b / max(iters * one, 1e-9))))
        per_call = []
        for _ in range(trials):
            hvd.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                call(x)
            per_call.append(max_all((time.perf_counter() - t0) / iters))
        if rank == 0:
            med, low = statistics.median(per_call), min(per_call)
            algbw = nbytes / med / 1e9
            busbw = algbw * 2 * (n - 1) / n
            ok = "FAIL" if bad else "OK"
            print(f"RESULT,{label},{n},{nbytes},{iters},{trials},"
                  f"{med * 1e6:.3f},{low * 1e6:.3f},{algbw:.4f},{busbw:.4f},"
                  f"{ok}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
