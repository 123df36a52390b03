"""Train a digits classifier on a Ray cluster with horovod.ray's
RayExecutor: each rank is a Ray actor, and `executor.run(train)` runs the
training function on all of them at once.

    python examples/ray_digits.py                        # a local Ray
    python examples/ray_digits.py --address auto --num-workers 4

Each rank takes its slice of every global batch, as in
examples/pytorch_digits.py; the accuracy printed is rank 0's on the
held-out quarter of scikit-learn's digits (shipped with it, no download).
"""

import argparse


def train(epochs, global_batch, lr, seed):
    """One rank's training; returns its final test accuracy."""
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    import horovod.torch as hvd

    hvd.init()
    torch.set_num_threads(1)
    rank, size = hvd.rank(), hvd.size()
    local_batch = global_batch // size
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25,
                                              random_state=seed, stratify=y)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9),
        named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    steps = len(x_tr) // global_batch
    for epoch in range(epochs):
        perm = torch.randperm(len(x_tr),
                              generator=torch.Generator().manual_seed(epoch))
        for step in range(steps):
            start = step * global_batch + rank * local_batch
            idx = perm[start:start + local_batch]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x_tr[idx]),
                                              y_tr[idx]).backward()
            opt.step()
    with torch.no_grad():
        sl = slice(rank, None, size)
        correct = (model(x_te[sl]).argmax(1) == y_te[sl]).sum().item()
        counts = hvd.allreduce(torch.tensor([correct, len(y_te[sl])],
                                            dtype=torch.float64), op=hvd.Sum)
    hvd.shutdown()
    return (counts[0] / counts[1]).item()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--address", help="a running Ray cluster (default: start "
                   "one here with --num-workers CPUs)")
    p.add_argument("--num-workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--global-batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()

    import ray

    from horovod.ray import RayExecutor

    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=args.num_workers, include_dashboard=False)
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60),
                           num_workers=args.num_workers)
    executor.start()
    try:
        accuracies = executor.run(train, args=(
            args.epochs, args.global_batch_size, args.lr, args.seed))
    finally:
        executor.shutdown()
        ray.shutdown()
    print("final test accuracy: %.4f (ranks=%d, global batch=%d, through "
          "RayExecutor)" % (accuracies[0], args.num_workers,
                            args.global_batch_size))


if __name__ == "__main__":
    main()
