"""The synthetic benchmark's model, batch and timing loop under torch
DistributedDataParallel (gloo), for comparison with our DistributedOptimizer.

  torchrun --nproc_per_node 2 benchmarks/ddp_synthetic.py --model resnet18 ...

Prints the same "Total img/sec on N CPU(s)" line as
examples/pytorch_synthetic_benchmark.py.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from synthetic_loop import MODELS, parse_args, time_and_report


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(MODELS[args.model]())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * dist.get_world_size())
    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.randint(0, 1000, (args.batch_size,))

    def step():
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()

    time_and_report(step, args, dist.get_rank(), dist.get_world_size())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
