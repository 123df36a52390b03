"""hvd.allreduce_ on torch tensors, measured with the anchors' method
(../shared/bench/README.md), so its RESULT lines sit beside torch_gloo.py's
(torch.distributed.all_reduce over gloo) in one table.

  horovodrun -np 2 python benchmarks/py_allreduce.py [-s 4,1M] [-b 1.5] [-l hvd-py]

Per size: 3 warm-up calls, doubling calibration until a batch takes >= 10 ms,
one exact correctness check on fresh input, then trials of `iters`
back-to-back calls after a barrier (trial time = max over ranks); median and
min per call, algbw = bytes/median, busbw = algbw*2(n-1)/n, GB = 1e9 bytes.
"""
import argparse
import statistics
import sys
import time

import torch

import horovod.torch as hvd
from bench_util import max_all

DEFAULT_SIZES = [4, 64, 1024, 16 << 10, 256 << 10, 1 << 20, 4 << 20,
                 16 << 20, 64 << 20, 256 << 20]


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s[-1].upper() in mult:
        return int(float(s[:-1]) * mult[s[-1].upper()])
    return int(s)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-s", default=None, help="sizes in bytes, K/M/G suffixes")
    p.add_argument("-b", type=float, default=1.5, help="seconds per size")
    p.add_argument("-l", default=None, help="label")
    p.add_argument("--out-of-place", action="store_true",
                   help="hvd.allreduce (returns a new tensor), the form "
                        "TensorFlow and JAX have, instead of allreduce_")
    args = p.parse_args()
    sizes = [parse_size(x) for x in args.s.split(",")] if args.s else DEFAULT_SIZES
    args.l = args.l or ("hvd-py-oop" if args.out_of_place else "hvd-py")
    torch.set_num_threads(1)
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    if rank == 0:
        print(f"# {args.l} np={n} inplace={int(not args.out_of_place)} "
              f"budget={args.b:.2f}s torch={torch.__version__} "
              f"horovod.torch allreduce{'' if args.out_of_place else '_'}")
        sys.stdout.flush()
    for requested in sizes:
        count = max(1, requested // 4)
        nbytes = count * 4
        pattern = (torch.arange(count, dtype=torch.int64) % 7 + 1).to(torch.float32)
        x = pattern * float(rank + 1)

        result = [x]

        def call():
            if args.out_of_place:
                result[0] = hvd.allreduce(x, op=hvd.Sum, name="bench.x")
            else:
                hvd.allreduce_(x, op=hvd.Sum, name="bench.x")

        for _ in range(3):
            call()
        calls = 1
        while True:
            hvd.barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                call()
            elapsed = max_all(time.perf_counter() - t0)
            if elapsed >= 0.01 or calls >= 1 << 20:
                one = elapsed / calls
                break
            calls *= 2
        x.copy_(pattern * float(rank + 1))
        call()
        bad = max_all(float((result[0] != pattern * float(n * (n + 1) // 2))
                            .sum().item()))
        x.zero_()
        iters = min(100000, int(0.02 / max(one, 1e-9)) + 1)
        trials = min(50, max(5, int(args.b / max(iters * one, 1e-9))))
        per_call = []
        for _ in range(trials):
            hvd.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            per_call.append(max_all((time.perf_counter() - t0) / iters))
        if rank == 0:
            med, low = statistics.median(per_call), min(per_call)
            algbw = nbytes / med / 1e9
            busbw = algbw * 2 * (n - 1) / n
            ok = "FAIL" if bad else "OK"
            print(f"RESULT,{args.l},{n},{nbytes},{iters},{trials},{med * 1e6:.3f},"
                  f"{low * 1e6:.3f},{algbw:.4f},{busbw:.4f},{ok}")
            sys.stdout.flush()
    hvd.shutdown()


if __name__ == "__main__":
    main()
