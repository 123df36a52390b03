"""An elastic training job whose result can be checked exactly: a linear
model whose gradient is minus the sum of its batch, summed over the workers
(hvd.Sum), and SGD with learning rate 1, so each epoch adds the sum of the
whole data set to the weights, in integers, whatever the job's size. A
sample processed twice, or a step lost or repeated across a reset, shows
in the final weights.

Prints timestamped lines the tests parse: START (before the framework is
imported), READY (after), STEP, RESET, FINAL (rank 0).

    elastic_train.py EPOCHS [--sleep S] [--commit-every K] [--metric]

--metric averages a metric each step with an unnamed allreduce, as a
training script would: workers that joined late number such operations
as the workers from the start do.
"""

import argparse
import os
import socket
import sys
import time

print("START pid=%d host=%s t=%.3f" % (os.getpid(), socket.gethostname(),
                                       time.time()), flush=True)

import torch  # noqa: E402

import horovod.torch as hvd  # noqa: E402

N, D, B = 96, 4, 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("epochs", type=int)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--commit-every", type=int, default=1)
    p.add_argument("--metric", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    x_all = torch.tensor([[(i * 7 + j * 3) % 11 for j in range(D)]
                          for i in range(N)], dtype=torch.float32)
    hvd.init()
    print("READY pid=%d t=%.3f" % (os.getpid(), time.time()), flush=True)
    model = torch.nn.Linear(D, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=1.0),
        named_parameters=model.named_parameters(), op=hvd.Sum)
    sampler = hvd.elastic.ElasticSampler(list(range(N)), shuffle=True, seed=1)
    state = hvd.elastic.TorchState(model, opt, sampler=sampler, epoch=0,
                                   batch=0, steps=0)
    state.register_reset_callbacks([lambda: print(
        "RESET pid=%d size=%d t=%.3f" % (os.getpid(), hvd.size(), time.time()),
        flush=True)])

    @hvd.elastic.run
    def train(state):
        while state.epoch < args.epochs:
            done_before = state.batch
            mine = list(state.sampler)
            left = len(state.sampler.remaining_indices)
            size, rank = hvd.size(), hvd.rank()
            for i in range(-(-len(mine) // B)):
                batch = mine[i * B:(i + 1) * B]
                # Padding repeats samples so every worker has as many: a
                # sample past the epoch's remainder counts zero.
                weight = torch.tensor(
                    [1.0 if rank + (i * B + j) * size < left else 0.0
                     for j in range(len(batch))])
                opt.zero_grad()
                loss = -(model(x_all[batch] * weight[:, None])).sum()
                loss.backward()
                opt.step()
                if args.metric:
                    mean = hvd.allreduce(torch.tensor([float(state.steps)]))
                    assert mean.item() == state.steps, (mean, state.steps)
                state.sampler.record_batch(i, B)
                state.batch = done_before + i + 1
                state.steps += 1
                print("STEP pid=%d epoch=%d batch=%d size=%d rank=%d t=%.3f"
                      % (os.getpid(), state.epoch, state.batch, size, rank,
                         time.time()), flush=True)
                if args.sleep:
                    time.sleep(args.sleep)
                if state.steps % args.commit_every == 0:
                    state.commit()
            state.epoch += 1
            state.batch = 0
            state.sampler.set_epoch(state.epoch)
            state.commit()

    train(state)
    got = model.weight.detach()[0].tolist()
    want = (x_all.sum(0) * args.epochs).tolist()
    print("FINAL pid=%d rank=%d size=%d ok=%d weights=%s want=%s" % (
        os.getpid(), hvd.rank(), hvd.size(), got == want, got, want),
        flush=True)


if __name__ == "__main__":
    main()
