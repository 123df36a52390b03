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
import torch
import torch.nn.functional as F

import horovod.torch as hvd
from synthetic_loop import MODELS, parse_args, time_and_report


def main():
    args = parse_args()
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

    time_and_report(step, args, hvd.rank(), hvd.size())
    hvd.shutdown()


if __name__ == "__main__":
    main()
