"""`TorchEstimator`: fits a torch.nn.Module on a Spark DataFrame with
Horovod (upstream's horovod.spark.torch API): `fit(df)` writes the
training data to the store, trains on `num_proc` ranks through
horovod.spark.run and returns a `TorchModel` whose `transform(df)` adds
the model's predictions.

The model is called with one tensor per feature column
(`model(*features)`); `loss(output, label)` with one label column, or per
label (with `loss_weights`) when the model returns one output per label.
Float columns become float32 tensors, integer labels int64.
"""

import io

from horovod.spark.common.estimator import (COMMON_PARAMS, HorovodEstimator,
                                            HorovodModel, Predictor,
                                            with_accessors)


@with_accessors
class TorchEstimator(HorovodEstimator):
    """model: a torch.nn.Module; optimizer: a torch.optim.Optimizer over
    its parameters; loss: a callable (output, label) -> scalar tensor, or
    one per label."""

    PARAMS = COMMON_PARAMS

    def _check(self, df):
        super()._check(df)
        p = self._params
        if p["optimizer"] is None or p["loss"] is None:
            raise ValueError("TorchEstimator: optimizer and loss are "
                             "required")

    def _model_bytes(self):
        import cloudpickle
        p = self._params
        # One pickle, so the optimizer keeps pointing at the model's
        # parameters on the ranks.
        return cloudpickle.dumps((p["model"], p["optimizer"], p["loss"]))

    def _spec_extra(self):
        return {"loss_weights": self._params["loss_weights"]}

    def _rank_fn(self):
        from horovod.spark.torch.remote import train
        return train

    def _trained(self, run_id, history, spec):
        import copy

        import torch

        store = self._params["store"]
        state = torch.load(io.BytesIO(store.read(spec["checkpoint"])))
        model = copy.deepcopy(self._params["model"])
        model.load_state_dict(state)
        return TorchModel(model, history, self._params["feature_cols"],
                          self._params["label_cols"],
                          self._params["output_cols"],
                          run_id).learn_output_sizes(spec["train_path"])


class _Predictor(Predictor):
    """The module, from its pickled form."""

    def _build(self, blob):
        import cloudpickle
        model = cloudpickle.loads(blob)
        model.eval()
        return model

    def __call__(self, columns):
        import torch

        inputs = []
        for a in columns:
            t = torch.from_numpy(a)
            inputs.append(t.float() if t.is_floating_point() else t)
        with torch.no_grad():
            out = self.model()(*inputs)
        outs = out if isinstance(out, (list, tuple)) else [out]
        return [o.numpy() for o in outs]


class TorchModel(HorovodModel):
    """A fitted TorchEstimator: `getModel()` is the trained module."""

    def __init__(self, model, history, feature_cols, label_cols, output_cols,
                 run_id):
        super().__init__(history, feature_cols, label_cols, output_cols,
                         run_id)
        self.model = model

    def getModel(self):
        return self.model

    def _predictor(self):
        import cloudpickle
        return _Predictor(cloudpickle.dumps(self.model))
