"""What each rank of a KerasEstimator's fit runs: rebuild the model from
its JSON and weights, compile it with hvd.DistributedOptimizer, fit on its
share of the store's data (cut to the smallest share, so every rank takes
the same number of batches), and on rank 0 write the weights and the
history after every epoch."""

import json
import os

# Keras 3 names weight files by this suffix.
WEIGHTS_SUFFIX = ".weights.h5"


def _inputs(columns):
    return columns[0] if len(columns) == 1 else columns


def train(spec):
    import cloudpickle
    import keras

    import horovod.keras as hvd
    from horovod.spark.common.shard import read_even_shard

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if spec["seed"] is not None:
        keras.utils.set_random_seed(spec["seed"])
    extra = cloudpickle.loads(spec["extra"])
    custom = extra["custom_objects"] or {}
    model = keras.models.model_from_json(spec["model"],
                                         custom_objects=custom)
    model.set_weights(extra["weights"])
    optimizer = keras.optimizers.deserialize(extra["optimizer"],
                                             custom_objects=custom)
    model.compile(optimizer=hvd.DistributedOptimizer(optimizer),
                  loss=extra["loss"], loss_weights=extra["loss_weights"],
                  metrics=extra["metrics"])
    features, labels = spec["feature_cols"], spec["label_cols"]

    def load(path):
        data, _ = read_even_shard(path, features + labels, rank, size)
        return (_inputs([data[c] for c in features]),
                _inputs([data[c] for c in labels]))

    x, y = load(spec["train_path"])
    validation = load(spec["val_path"]) if spec["val_path"] else None
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                 hvd.callbacks.MetricAverageCallback()]
    callbacks += list(extra["callbacks"] or [])
    if rank == 0:
        callbacks.append(_Checkpoint(spec, keras))
    history = model.fit(x, y, batch_size=spec["batch_size"],
                        epochs=spec["epochs"], shuffle=spec["shuffle"],
                        validation_data=validation,
                        validation_batch_size=spec["val_batch_size"],
                        callbacks=callbacks,
                        verbose=spec["verbose"] if rank == 0 else 0)
    hvd.shutdown()
    return {k: [float(v) for v in vs] for k, vs in history.history.items()}


def _Checkpoint(spec, keras):
    class Checkpoint(keras.callbacks.Callback):
        """Rank 0's weights and history after every epoch, each file
        replaced whole."""

        def __init__(self):
            super().__init__()
            self.history = {}

        def on_epoch_end(self, epoch, logs=None):
            for k, v in (logs or {}).items():
                self.history.setdefault(k, []).append(float(v))
            path = spec["checkpoint"] + WEIGHTS_SUFFIX
            os.makedirs(os.path.dirname(path), exist_ok=True)
            partial = spec["checkpoint"] + ".partial" + WEIGHTS_SUFFIX
            self.model.save_weights(partial)
            os.replace(partial, path)
            os.makedirs(spec["logs"], exist_ok=True)
            with open(os.path.join(spec["logs"], "history.json"), "w") as f:
                json.dump(self.history, f)

    return Checkpoint()
