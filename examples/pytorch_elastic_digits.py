"""Elastic training of a small classifier on scikit-learn's digits data set
(it ships inside the package, no download): the job keeps training while
workers fail and hosts come and go.

    horovodrun -np 2 --min-np 1 --max-np 4 \\
        --host-discovery-script ./discover_hosts.sh \\
        python examples/pytorch_elastic_digits.py

where discover_hosts.sh prints the usable hosts, one `host:slots` per
line, e.g. `echo localhost:4`. A worker that dies makes the others roll
back to the last commit and go on without it; a host that appears joins at
the next commit and receives the state. The learning rate follows the
job's size (reset callback), every sample of an epoch is trained on once
whatever the size (ElasticSampler), and each epoch ends with the test
accuracy on rank 0.
"""

import argparse

import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import horovod.torch as hvd


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=16,
                   help="per worker")
    p.add_argument("--lr", type=float, default=0.02, help="per worker")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--batches-per-commit", type=int, default=5)
    args = p.parse_args()

    hvd.init()
    torch.set_num_threads(1)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25,
                                              random_state=args.seed,
                                              stratify=y)
    train_set = torch.utils.data.TensorDataset(x_tr, y_tr)

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                          momentum=0.9)
    opt = hvd.DistributedOptimizer(opt,
                                   named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(train_set, shuffle=True,
                                         seed=args.seed)
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                         sampler=sampler)
    state = hvd.elastic.TorchState(model, opt, sampler=sampler, epoch=0,
                                   batch=0)

    def on_reset():
        for group in opt.param_groups:
            group["lr"] = args.lr * hvd.size()
        if hvd.rank() == 0:
            print("job re-formed: %d workers" % hvd.size(), flush=True)

    state.register_reset_callbacks([on_reset])

    def evaluate():
        model.eval()
        with torch.no_grad():
            sl = slice(hvd.rank(), None, hvd.size())
            correct = (model(x_te[sl]).argmax(1) == y_te[sl]).sum()
            counts = hvd.allreduce(
                torch.tensor([correct.item(), len(y_te[sl])],
                             dtype=torch.float64), op=hvd.Sum,
                name="epoch_acc")
        model.train()
        return (counts[0] / counts[1]).item()

    @hvd.elastic.run
    def train(state):
        while state.epoch < args.epochs:
            done_before = state.batch
            for i, (xb, yb) in enumerate(loader):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
                state.sampler.record_batch(i, args.batch_size)
                state.batch = done_before + i + 1
                if state.batch % args.batches_per_commit == 0:
                    state.commit()
            acc = evaluate()
            if hvd.rank() == 0:
                print("epoch %2d  workers %d  test accuracy %.4f"
                      % (state.epoch + 1, hvd.size(), acc), flush=True)
            state.epoch += 1
            state.batch = 0
            state.sampler.set_epoch(state.epoch)
            state.commit()
        return evaluate()

    acc = train(state)
    if hvd.rank() == 0:
        print("final test accuracy: %.4f (workers=%d)" % (acc, hvd.size()),
              flush=True)


if __name__ == "__main__":
    main()
