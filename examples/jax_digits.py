"""Train a small classifier on scikit-learn's digits data set (no download)
with JAX, optax and Horovod:

    horovodrun -np 2 python examples/jax_digits.py

The train step is jitted; its gradient allreduce runs inside it. Each rank
takes its slice of every global batch, so N ranks with batch B see exactly
the batches one process with batch N*B sees: the final accuracy matches
single-process training with the same global batch.
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import horovod.jax as hvd


def init_params(key):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (64, 128)) * 0.1,
            "b1": jnp.zeros(128),
            "w2": jax.random.normal(k2, (128, 10)) * 0.1,
            "b2": jnp.zeros(10)}


def logits(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def loss_fn(params, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(
        logits(params, x), y).mean()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--global-batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if args.global_batch_size % size:
        raise SystemExit("--global-batch-size must be divisible by the number "
                         "of ranks (%d)" % size)
    local_batch = args.global_batch_size // size

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25,
                                              random_state=args.seed,
                                              stratify=y)

    # Different on purpose: the broadcast makes every rank start from rank
    # 0's parameters.
    params = init_params(jax.random.PRNGKey(args.seed + rank))
    params = hvd.broadcast_parameters(params, root_rank=0)
    tx = hvd.DistributedOptimizer(optax.sgd(args.lr, momentum=0.9))
    state = tx.init(params)

    @jax.jit
    def train_step(params, state, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(params, xb, yb)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    steps = len(x_tr) // args.global_batch_size
    for epoch in range(args.epochs):
        perm = np.random.RandomState(epoch).permutation(len(x_tr))
        total = 0.0
        for step in range(steps):
            start = step * args.global_batch_size + rank * local_batch
            idx = perm[start:start + local_batch]
            params, state, loss = train_step(params, state, x_tr[idx],
                                             y_tr[idx])
            total += float(loss)
        loss = float(hvd.allreduce(jnp.asarray(total / steps),
                                   name="epoch_loss"))
        # Each rank scores a slice of the test set; sum the counts.
        sl = slice(rank, None, size)
        pred = np.argmax(np.asarray(logits(params, x_te[sl])), axis=1)
        counts = np.asarray(hvd.allreduce(
            jnp.asarray([np.sum(pred == y_te[sl]), len(pred)], jnp.float32),
            op=hvd.Sum, name="epoch_acc"))
        acc = counts[0] / counts[1]
        if rank == 0:
            print("epoch %2d  loss %.4f  test accuracy %.4f"
                  % (epoch + 1, loss, acc), flush=True)
    if rank == 0:
        print("final test accuracy: %.4f (ranks=%d, global batch=%d)"
              % (acc, size, args.global_batch_size))
    hvd.shutdown()


if __name__ == "__main__":
    main()
