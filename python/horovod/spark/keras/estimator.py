"""`KerasEstimator`: fits a Keras 3 model on a Spark DataFrame with Horovod
(upstream's horovod.spark.keras API): `fit(df)` writes the training data
to the store, trains on `num_proc` ranks through horovod.spark.run and
returns a `KerasModel` whose `transform(df)` adds the model's predictions.

The model travels as its JSON and weights, the optimizer as its Keras
config (a custom layer or optimizer needs `custom_objects`); loss, metrics
and callbacks are cloudpickled. One feature column is the model's input,
several are its inputs in order; likewise labels and outputs.
"""


from horovod.spark.common.estimator import (COMMON_PARAMS, HorovodEstimator,
                                            HorovodModel, Predictor,
                                            with_accessors)
from horovod.spark.keras.remote import WEIGHTS_SUFFIX


@with_accessors
class KerasEstimator(HorovodEstimator):
    """model: a keras.Model; optimizer: a Keras optimizer (not yet used by
    the model); loss: a Keras loss (name, object or function), or one per
    output; custom_objects: for the model's JSON."""

    PARAMS = dict(COMMON_PARAMS, custom_objects=None)

    def _check(self, df):
        super()._check(df)
        p = self._params
        if p["optimizer"] is None or p["loss"] is None:
            raise ValueError("KerasEstimator: optimizer and loss are "
                             "required")

    def _model_bytes(self):
        return self._params["model"].to_json()

    def _spec_extra(self):
        import cloudpickle
        import keras

        p = self._params
        return {"extra": cloudpickle.dumps({
            "weights": p["model"].get_weights(),
            "optimizer": keras.optimizers.serialize(p["optimizer"]),
            "loss": p["loss"], "loss_weights": p["loss_weights"],
            "metrics": p["metrics"], "callbacks": p["callbacks"],
            "custom_objects": p["custom_objects"]})}

    def _rank_fn(self):
        from horovod.spark.keras.remote import train
        return train

    def _trained(self, run_id, history, spec):
        import keras

        p = self._params
        model = keras.models.model_from_json(
            spec["model"], custom_objects=p["custom_objects"] or {})
        model.load_weights(spec["checkpoint"] + WEIGHTS_SUFFIX)
        return KerasModel(model, history, p["feature_cols"], p["label_cols"],
                          p["output_cols"], run_id, p["custom_objects"]
                          ).learn_output_sizes(spec["train_path"])


class _Predictor(Predictor):
    """The model, from its JSON, weights and custom objects."""

    def _build(self, state):
        import keras

        model_json, weights, custom = state
        model = keras.models.model_from_json(model_json,
                                             custom_objects=custom or {})
        model.set_weights(weights)
        return model

    def __call__(self, columns):
        inputs = columns[0] if len(columns) == 1 else columns
        out = self.model().predict(inputs, verbose=0)
        return list(out) if isinstance(out, (list, tuple)) else [out]


class KerasModel(HorovodModel):
    """A fitted KerasEstimator: `getModel()` is the trained keras.Model."""

    def __init__(self, model, history, feature_cols, label_cols, output_cols,
                 run_id, custom_objects=None):
        super().__init__(history, feature_cols, label_cols, output_cols,
                         run_id)
        self.model = model
        self.custom_objects = custom_objects

    def getModel(self):
        return self.model

    def _predictor(self):
        return _Predictor((self.model.to_json(), self.model.get_weights(),
                           self.custom_objects))
