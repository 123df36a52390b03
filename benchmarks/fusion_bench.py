"""Tensor fusion: 1000 tensors of 4 KiB submitted per step (as a model's
gradients would be) against one 4 MiB tensor, same bytes.

  horovodrun -np 2 python benchmarks/fusion_bench.py [--steps 100]

Prints FUSION,<np>,<case>,<median_step_us>,<min_step_us> lines; the step time
is the max over ranks. The two cases' steps are interleaved in blocks of
BLOCK (after WARMUPS untimed steps of each), as in allreduce_bench's fusion
case: a host whose speed drifts weighs on both alike, and neither alone
pays for the process's first, slower, milliseconds.
"""
import argparse
import statistics

import torch

import horovod.torch as hvd
from bench_util import timed_steps

WARMUPS = 20
BLOCK = 10


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--tensor-bytes", type=int, default=4096)
    args = p.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    many = [torch.ones(args.tensor_bytes // 4) for _ in range(args.count)]
    one = torch.ones(args.count * args.tensor_bytes // 4)
    names = ["fusion.g%d" % i for i in range(args.count)]

    def step_many():
        handles = [hvd.allreduce_async_(t, op=hvd.Sum, name=nm)
                   for t, nm in zip(many, names)]
        for h in handles:
            hvd.synchronize(h)

    def step_one():
        hvd.allreduce_(one, op=hvd.Sum, name="fusion.one")

    cases = (("1x%dKiB" % (args.count * args.tensor_bytes // 1024), step_one,
              [one]),
             ("%dx%dKiB" % (args.count, args.tensor_bytes // 1024), step_many,
              many))
    for _, fn, _ in cases:
        for _ in range(WARMUPS):
            fn()
    times = {case: [] for case, _, _ in cases}
    for block in range(0, args.steps, BLOCK):
        for case, fn, tensors in cases:
            # Each step multiplies the values by the number of ranks (a
            # sum): each block starts its case's tensors from ones, to keep
            # them finite.
            for t in tensors:
                t.fill_(1.0)
            times[case] += timed_steps(fn, min(BLOCK, args.steps - block))
    if hvd.rank() == 0:
        for case, _, _ in cases:
            print("FUSION,%d,%s,%.1f,%.1f" % (
                hvd.size(), case, statistics.median(times[case]) * 1e6,
                min(times[case]) * 1e6), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
