"""Train a small classifier on scikit-learn's digits data set (it ships
inside the package, no download) with Horovod and a TensorFlow 2
GradientTape.

    horovodrun -np 2 python examples/tensorflow2_digits.py

Each rank takes its slice of every global batch, so N ranks with batch B
see exactly the batches one process with batch N*B sees: the final accuracy
matches single-process training with the same global batch.
"""

import argparse

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import horovod.tensorflow as hvd


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
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25,
                                              random_state=args.seed,
                                              stratify=y)

    tf.keras.utils.set_random_seed(args.seed + rank)  # broadcast fixes it
    model = tf.keras.Sequential([tf.keras.Input((64,)),
                                 tf.keras.layers.Dense(128, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    opt = tf.keras.optimizers.SGD(args.lr, momentum=0.9)
    opt.build(model.trainable_variables)
    hvd.broadcast_variables(model.variables, root_rank=0)
    hvd.broadcast_variables(opt.variables, root_rank=0)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    steps = len(x_tr) // args.global_batch_size
    for epoch in range(args.epochs):
        perm = np.random.RandomState(epoch).permutation(len(x_tr))
        total = 0.0
        for step in range(steps):
            start = step * args.global_batch_size + rank * local_batch
            idx = perm[start:start + local_batch]
            total += float(train_step(x_tr[idx], y_tr[idx]))
        loss = float(hvd.allreduce(tf.constant(total / steps),
                                   name="epoch_loss"))
        # Each rank scores a slice of the test set; sum the counts.
        sl = slice(rank, None, size)
        pred = np.argmax(model(x_te[sl]).numpy(), axis=1)
        counts = hvd.allreduce(
            tf.constant([np.sum(pred == y_te[sl]), len(pred)], tf.float64),
            op=hvd.Sum, name="epoch_acc").numpy()
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
