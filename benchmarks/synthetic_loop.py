"""The synthetic benchmark's options and timing loop, shared by the
comparison scripts that run examples/pytorch_synthetic_benchmark.py's model
another way (DDP, lockstep), so their numbers compare with the example's."""
import argparse
import os
import sys
import timeit

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from pytorch_synthetic_benchmark import MODELS  # noqa: E402,F401


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18", choices=sorted(MODELS))
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-warmup-batches", type=int, default=10)
    p.add_argument("--num-batches-per-iter", type=int, default=10)
    p.add_argument("--num-iters", type=int, default=10)
    p.add_argument("--num-threads", type=int, default=0)
    return p.parse_args()


def time_and_report(step, args, rank, size):
    """Warms up, times `step` as the example does, and has rank 0 print the
    example's "Total img/sec on N CPU(s)" line."""
    timeit.timeit(step, number=args.num_warmup_batches)
    rates = []
    for _ in range(args.num_iters):
        t = timeit.timeit(step, number=args.num_batches_per_iter)
        rates.append(args.batch_size * args.num_batches_per_iter / t)
    if rank == 0:
        print("Img/sec per CPU: %.1f +-%.1f" % (np.mean(rates), 1.96 * np.std(rates)))
        print("Total img/sec on %d CPU(s): %.1f +-%.1f"
              % (size, size * np.mean(rates), size * 1.96 * np.std(rates)), flush=True)
