"""Train a small classifier on scikit-learn's digits data set (no download)
with Keras 3 model.fit and Horovod's callbacks, on any Keras backend:

    KERAS_BACKEND=tensorflow horovodrun -np 2 python examples/keras_digits.py
    KERAS_BACKEND=torch      horovodrun -np 2 python examples/keras_digits.py
    KERAS_BACKEND=jax        horovodrun -np 2 python examples/keras_digits.py

Each rank fits its slice of every global batch. The learning rate warms up
from lr/size to lr over the first epochs (large global batches train badly
at full rate from the start); metrics are averaged over the ranks.
"""

import argparse

import keras
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import horovod.keras as hvd


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--global-batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup-epochs", type=int, default=2)
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
    # Rank r's share of every global batch, in order.
    steps = len(x_tr) // args.global_batch_size
    mine = np.concatenate([
        np.arange(s * args.global_batch_size + rank * local_batch,
                  s * args.global_batch_size + (rank + 1) * local_batch)
        for s in range(steps)])

    keras.utils.set_random_seed(args.seed + rank)  # broadcast fixes it
    model = keras.Sequential([keras.Input((64,)),
                              keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(10)])
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(args.lr,
                                                        momentum=0.9))
    model.compile(optimizer=opt,
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True),
                  metrics=["accuracy"])
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(
            initial_lr=args.lr, warmup_epochs=args.warmup_epochs),
    ]
    # Each rank scores its slice of the test set; MetricAverageCallback
    # averages the slices' results.
    model.fit(x_tr[mine], y_tr[mine], batch_size=local_batch,
              epochs=args.epochs, shuffle=False, callbacks=callbacks,
              validation_data=(x_te[rank::size], y_te[rank::size]),
              verbose=2 if rank == 0 else 0)
    scores = model.evaluate(x_te[rank::size], y_te[rank::size], verbose=0,
                            return_dict=True)
    acc = hvd.allreduce(np.array([scores["accuracy"]], np.float32),
                        name="final_accuracy")
    if rank == 0:
        print("final test accuracy: %.4f (ranks=%d, backend=%s)"
              % (float(keras.ops.convert_to_numpy(acc)[0]), size,
                 keras.backend.backend()))
    hvd.shutdown()


if __name__ == "__main__":
    main()
