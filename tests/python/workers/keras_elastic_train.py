"""An elastic Keras 3 job (any backend, KERAS_BACKEND) under horovodrun's
elastic mode: KerasState and the fit callbacks, each worker fitting its
shard of the data. Prints the records tests/python/elastic_job.py parses:
START, READY, STEP (after each batch), RESET, FINAL (ok=1 when every
worker ends with the same weights, all epochs done).

    keras_elastic_train.py EPOCHS [--sleep S]
"""

import argparse
import os
import socket
import time

print("START pid=%d host=%s t=%.3f" % (os.getpid(), socket.gethostname(),
                                       time.time()), flush=True)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import horovod.keras as hvd  # noqa: E402


class Steps(keras.callbacks.Callback):
    def __init__(self, state, sleep):
        super().__init__()
        self.state, self.sleep = state, sleep

    def on_train_batch_end(self, batch, logs=None):
        print("STEP pid=%d epoch=%d batch=%d size=%d rank=%d t=%.3f"
              % (os.getpid(), self.state.epoch, batch + 1, hvd.size(),
                 hvd.rank(), time.time()), flush=True)
        if self.sleep:
            time.sleep(self.sleep)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("epochs", type=int)
    p.add_argument("--sleep", type=float, default=0.0)
    args = p.parse_args()
    hvd.init()
    print("READY pid=%d t=%.3f" % (os.getpid(), time.time()), flush=True)
    x = np.random.RandomState(0).randn(96, 4).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32))
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8),
                              keras.layers.Dense(1)])
    model.compile(optimizer=hvd.DistributedOptimizer(
        keras.optimizers.SGD(0.01, momentum=0.5)), loss="mse")
    state = hvd.elastic.KerasState(model, epoch=0, batch=0)
    state.register_reset_callbacks([lambda: print(
        "RESET pid=%d size=%d t=%.3f" % (os.getpid(), hvd.size(), time.time()),
        flush=True)])
    callbacks = [hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=1),
                 Steps(state, args.sleep)]

    @hvd.elastic.run
    def train(state):
        r, n = hvd.rank(), hvd.size()
        state.model.fit(x[r::n], y[r::n], batch_size=4,
                        initial_epoch=state.epoch, epochs=args.epochs,
                        callbacks=callbacks, verbose=0)

    train(state)
    mine = np.concatenate([np.ravel(w) for w in model.get_weights()])
    everyone = hvd.allgather_object(mine.tobytes())
    loss = float(model.evaluate(x, y, verbose=0))
    print("FINAL pid=%d rank=%d size=%d ok=%d epoch=%d loss=%.4f" % (
        os.getpid(), hvd.rank(), hvd.size(),
        all(e == everyone[0] for e in everyone) and state.epoch == args.epochs,
        state.epoch, loss), flush=True)


if __name__ == "__main__":
    main()
