"""Train a small classifier on scikit-learn's digits data set (it ships
inside the package, no download) with Horovod.

    horovodrun -np 2 python examples/pytorch_digits.py

Each rank takes its slice of every global batch, so N ranks with batch B
see exactly the batches one process with batch N*B sees: the final accuracy
matches single-process training with the same global batch.

    horovodrun -np 4 python examples/pytorch_digits.py --op adasum

combines the ranks' weight changes with Adasum instead of averaging their
gradients (a power-of-two number of ranks).

    python examples/pytorch_digits.py --num-proc 4 --hosts h1:2,h2:2

starts the ranks itself through horovod.run (on this host without
--hosts) and prints what rank 0's training returned.
"""

import argparse

import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tqdm import tqdm

import horovod.torch as hvd


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--global-batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--op", choices=["average", "adasum"], default="average")
    p.add_argument("--num-proc", type=int,
                   help="start this many ranks with horovod.run")
    p.add_argument("--hosts", help="with --num-proc: hosts and slots")
    args = p.parse_args()
    if args.num_proc is None:
        train(args)
        return
    import horovod
    accuracies = horovod.run(train, args=(args,), np=args.num_proc,
                             hosts=args.hosts)
    print("final test accuracy: %.4f (ranks=%d, global batch=%d, through "
          "horovod.run)" % (accuracies[0], args.num_proc,
                            args.global_batch_size))


def train(args):
    """Trains on this rank's share; returns the final test accuracy."""
    hvd.init()
    torch.set_num_threads(1)
    rank, size = hvd.rank(), hvd.size()
    if args.global_batch_size % size:
        raise SystemExit("--global-batch-size must be divisible by the number "
                         "of ranks (%d)" % size)
    local_batch = args.global_batch_size // size

    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25,
                                              random_state=args.seed,
                                              stratify=y)

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    opt = hvd.DistributedOptimizer(
        opt, named_parameters=model.named_parameters(),
        op=hvd.Adasum if args.op == "adasum" else hvd.Average)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

    steps = len(x_tr) // args.global_batch_size
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(x_tr),
                              generator=torch.Generator().manual_seed(epoch))
        bar = tqdm(range(steps), desc="epoch %d/%d" % (epoch + 1, args.epochs),
                   disable=rank != 0, leave=False)
        total_loss = torch.zeros(1)
        for step in bar:
            start = step * args.global_batch_size + rank * local_batch
            idx = perm[start:start + local_batch]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x_tr[idx]), y_tr[idx])
            loss.backward()
            opt.step()
            total_loss += loss.detach()
            bar.set_postfix(loss="%.4f" % loss.item())
        loss = hvd.allreduce(total_loss / steps, name="epoch_loss").item()
        model.eval()
        with torch.no_grad():
            # Each rank scores a slice of the test set; sum the counts.
            sl = slice(rank, None, size)
            correct = (model(x_te[sl]).argmax(1) == y_te[sl]).sum()
            counts = hvd.allreduce(torch.tensor([correct.item(), len(y_te[sl])],
                                                dtype=torch.float64),
                                   op=hvd.Sum, name="epoch_acc")
        acc = (counts[0] / counts[1]).item()
        if rank == 0:
            print("epoch %2d  loss %.4f  test accuracy %.4f" % (epoch + 1, loss, acc),
                  flush=True)
    if rank == 0 and args.num_proc is None:
        print("final test accuracy: %.4f (ranks=%d, global batch=%d)"
              % (acc, size, args.global_batch_size))
    hvd.shutdown()
    return acc


if __name__ == "__main__":
    main()
