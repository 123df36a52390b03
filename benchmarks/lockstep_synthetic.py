"""The synthetic benchmark's model, batch and timing loop with every rank
training on its own and the ranks meeting once a step on a 4-byte
allreduce: a synchronous job's steps without its gradient exchange, the
most that synchronous data parallelism can reach on this machine.

  horovodrun -np 2 python benchmarks/lockstep_synthetic.py --model resnet18 ...

Two ranks in step wait for the slower one every step, which two
independent runs never do: where the two cores run at different speeds,
this is below the sum of two independent runs. Prints the same
"Total img/sec on N CPU(s)" line as examples/pytorch_synthetic_benchmark.py.
"""
import argparse
import os
import sys
import timeit

import numpy as np
import torch
import torch.nn.functional as F

import horovod.torch as hvd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from pytorch_synthetic_benchmark import MODELS  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18", choices=sorted(MODELS))
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-warmup-batches", type=int, default=10)
    p.add_argument("--num-batches-per-iter", type=int, default=10)
    p.add_argument("--num-iters", type=int, default=10)
    p.add_argument("--num-threads", type=int, default=0)
    args = p.parse_args()
    hvd.init()
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    torch.manual_seed(0)
    model = MODELS[args.model]()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.randint(0, 1000, (args.batch_size,))
    meet = torch.zeros(1)

    def step():
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()
        hvd.allreduce_(meet, name="lockstep")

    timeit.timeit(step, number=args.num_warmup_batches)
    rates = []
    for _ in range(args.num_iters):
        t = timeit.timeit(step, number=args.num_batches_per_iter)
        rates.append(args.batch_size * args.num_batches_per_iter / t)
    n = hvd.size()
    if hvd.rank() == 0:
        print("Img/sec per CPU: %.1f +-%.1f" % (np.mean(rates), 1.96 * np.std(rates)))
        print("Total img/sec on %d CPU(s): %.1f +-%.1f"
              % (n, n * np.mean(rates), n * 1.96 * np.std(rates)), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
