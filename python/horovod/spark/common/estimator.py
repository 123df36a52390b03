"""What the Estimators share: their parameters (upstream's names, with
getX/setX accessors), the data a fit writes to the store, the training run
through horovod.spark.run, and the Model transformer that adds the
trained model's predictions to a DataFrame.

A framework's Estimator gives `_rank_fn()` (the function every rank runs,
taking the fit's spec and returning rank 0's history), `_model_bytes()`
(what the ranks need to build the model) and `_trained(...)` (the Model
from the checkpoint rank 0 wrote).

Thread-safety: an Estimator is used by one thread; `fit` does not change
its parameters.
"""

import re
import uuid

from pyspark.ml import Estimator, Model

# Upstream's main parameters and their defaults; framework Estimators add
# their own.
COMMON_PARAMS = {
    "num_proc": None, "model": None, "optimizer": None, "loss": None,
    "loss_weights": None, "metrics": None, "store": None,
    "feature_cols": None, "label_cols": None, "output_cols": None,
    "batch_size": 32, "val_batch_size": None, "epochs": 1,
    "validation": None, "callbacks": None, "verbose": 1, "shuffle": True,
    "random_seed": None, "run_id": None, "env": None,
}


def _camel(name):
    return "".join(p.capitalize() for p in name.split("_"))


def with_accessors(cls):
    """Adds getX/setX for every parameter in cls.PARAMS (num_proc gives
    getNumProc and setNumProc), as upstream's Estimators have."""
    for name in cls.PARAMS:
        def getter(self, _n=name):
            return self._params[_n]

        def setter(self, value, _n=name):
            self._params[_n] = value
            return self
        setattr(cls, "get" + _camel(name), getter)
        setattr(cls, "set" + _camel(name), setter)
    return cls


class HorovodEstimator(Estimator):
    PARAMS = COMMON_PARAMS

    def __init__(self, **kwargs):
        super().__init__()
        unknown = sorted(set(kwargs) - set(self.PARAMS))
        if unknown:
            raise TypeError("%s got unknown parameter(s) %s; it takes %s"
                            % (type(self).__name__, ", ".join(unknown),
                               ", ".join(sorted(self.PARAMS))))
        self._params = dict(self.PARAMS)
        self._params.update(kwargs)

    def copy(self, extra=None):
        other = type(self)(**self._params)
        for k, v in (extra or {}).items():
            other._params[k] = v
        return other

    def _check(self, df):
        p = self._params
        for name in ("model", "store", "feature_cols", "label_cols"):
            if p[name] is None:
                raise ValueError("%s: %s is required"
                                 % (type(self).__name__, name))
        for name in ("feature_cols", "label_cols"):
            if isinstance(p[name], str) or not p[name]:
                raise ValueError("%s: %s=%r must be a non-empty list of "
                                 "column names" % (type(self).__name__, name,
                                                   p[name]))
        for c in list(p["feature_cols"]) + list(p["label_cols"]):
            if c not in df.columns:
                raise ValueError("%s: column %r is not in the DataFrame (it "
                                 "has %s)" % (type(self).__name__, c,
                                              ", ".join(df.columns)))
        for name in ("batch_size", "epochs"):
            if not isinstance(p[name], int) or p[name] < 1:
                raise ValueError("%s: %s=%r is not a positive integer"
                                 % (type(self).__name__, name, p[name]))
        v = p["validation"]
        if v is not None and not isinstance(v, str) and \
                not (isinstance(v, float) and 0 < v < 1):
            raise ValueError("%s: validation=%r must be a fraction in (0, 1) "
                             "or the name of a column marking validation rows"
                             % (type(self).__name__, v))
        if isinstance(v, str) and v not in df.columns:
            raise ValueError("%s: validation column %r is not in the "
                             "DataFrame" % (type(self).__name__, v))

    def _prepare(self, df, run_id, num_proc):
        """Writes the training (and validation) rows as Parquet into the
        store, `num_proc` files each; returns (train path, val path or
        None, train rows, val rows)."""
        p = self._params
        store = p["store"]
        cols = list(dict.fromkeys(list(p["feature_cols"]) +
                                  list(p["label_cols"])))
        df = as_arrays(df, cols)
        v = p["validation"]
        if isinstance(v, str):
            from pyspark.sql import functions as F
            train_df = df.where(~F.col(v).cast("boolean")).select(cols)
            val_df = df.where(F.col(v).cast("boolean")).select(cols)
        elif v is not None:
            train_df, val_df = df.select(cols).randomSplit(
                [1.0 - v, v], seed=p["random_seed"])
        else:
            train_df, val_df = df.select(cols), None
        train_path = store.get_train_data_path(run_id)
        val_path = store.get_val_data_path(run_id)
        train_rows = _write(train_df, store, train_path, num_proc)
        val_rows = 0
        if val_df is not None:
            val_rows = _write(val_df, store, val_path, num_proc)
        if train_rows < num_proc:
            raise ValueError("%s: %d training rows cannot feed %d ranks"
                             % (type(self).__name__, train_rows, num_proc))
        return train_path, (val_path if val_rows else None), train_rows, \
            val_rows

    def _fit(self, df):
        import horovod.spark

        self._check(df)
        p = self._params
        sc = df.sparkSession.sparkContext
        num_proc = p["num_proc"] or sc.defaultParallelism
        run_id = p["run_id"] or "run_" + uuid.uuid4().hex[:12]
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", run_id):
            raise ValueError("%s: run_id=%r may hold letters, digits, '_', "
                             "'.' and '-' only" % (type(self).__name__,
                                                   run_id))
        train_path, val_path, train_rows, val_rows = self._prepare(
            df, run_id, num_proc)
        spec = {"model": self._model_bytes(),
                "feature_cols": list(p["feature_cols"]),
                "label_cols": list(p["label_cols"]),
                "batch_size": p["batch_size"],
                "val_batch_size": p["val_batch_size"] or p["batch_size"],
                "epochs": p["epochs"], "shuffle": p["shuffle"],
                "seed": p["random_seed"], "verbose": p["verbose"],
                "train_path": train_path, "val_path": val_path,
                "checkpoint": p["store"].get_checkpoint_path(run_id),
                "logs": p["store"].get_logs_path(run_id)}
        spec.update(self._spec_extra())
        history = horovod.spark.run(self._rank_fn(), args=(spec,),
                                    num_proc=num_proc, env=p["env"],
                                    verbose=p["verbose"])[0]
        return self._trained(run_id, history, spec)

    def _spec_extra(self):
        return {}


def as_arrays(df, cols):
    """`df` with every ML Vector among `cols` turned into an array column
    (Parquet and pandas carry arrays, not Spark's vector type)."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.ml.linalg import VectorUDT

    for field in df.schema.fields:
        if field.name in cols and isinstance(field.dataType, VectorUDT):
            df = df.withColumn(field.name, vector_to_array(field.name))
    return df


def _write(df, store, path, num_proc):
    df = df.repartition(num_proc).cache()
    try:
        df.write.mode("overwrite").parquet(store.to_spark_path(path))
        return df.count()
    finally:
        df.unpersist()


class HorovodModel(Model):
    """A trained model as a Spark ML transformer: `transform(df)` adds one
    column per label, `<label>__output` unless output_cols names them,
    with the model's output for each row (a number, or an array of
    them). Subclasses give `_predictor()`: a function from the feature
    columns (numpy arrays) to a list of outputs, one per label."""

    def __init__(self, history, feature_cols, label_cols, output_cols,
                 run_id):
        super().__init__()
        self.history = history
        self.feature_cols = list(feature_cols)
        self.label_cols = list(label_cols)
        self.output_cols = list(output_cols or
                                [c + "__output" for c in label_cols])
        self.run_id = run_id
        # Values per row of each output; learnt from one row when unknown.
        self.output_sizes = None

    def learn_output_sizes(self, train_path):
        """Runs the model on the first training row the fit wrote, so
        `transform` knows its columns' types without a Spark job."""
        from horovod.spark.common.shard import read_shard, total_rows

        one = read_shard(train_path, self.feature_cols, 0,
                         total_rows(train_path))
        self.output_sizes = [out[0].size for out in self._predictor()(
            [one[c] for c in self.feature_cols])]
        return self

    def getHistory(self):
        return self.history

    def getRunId(self):
        return self.run_id

    def getFeatureColumns(self):
        return self.feature_cols

    def getOutputCols(self):
        return self.output_cols

    def setOutputCols(self, cols):
        self.output_cols = list(cols)
        return self

    def _transform(self, df):
        from pyspark.sql.types import (ArrayType, DoubleType, StructField,
                                       StructType)

        df = as_arrays(df, self.feature_cols)
        predict = self._predictor()
        sizes = self.output_sizes
        if sizes is None:
            # The output's shape, from a first row, decides the types.
            sample = df.select(self.feature_cols).limit(1).toPandas()
            sizes = [out[0].size for out in predict(
                _features(sample, self.feature_cols))]
        fields = list(df.schema.fields)
        scalar = []
        for name, size in zip(self.output_cols, sizes):
            scalar.append(size == 1)
            fields.append(StructField(name, DoubleType() if scalar[-1]
                                      else ArrayType(DoubleType())))
        feature_cols, output_cols = self.feature_cols, self.output_cols

        def add_predictions(frames):
            for frame in frames:
                outs = predict(_features(frame, feature_cols))
                for name, out, one in zip(output_cols, outs, scalar):
                    out = out.reshape(len(frame), -1).astype("float64")
                    frame[name] = out[:, 0] if one else list(out)
                yield frame

        return df.mapInPandas(add_predictions, StructType(fields))


class Predictor:
    """What `_predictor()` returns: built from a picklable `state`, it
    builds the model (`_build(state)`) once per process, on its first call,
    and never pickles the built model."""

    def __init__(self, state):
        self._state = state
        self._model = None

    def __getstate__(self):
        return {"_state": self._state, "_model": None}

    def model(self):
        if self._model is None:
            self._model = self._build(self._state)
        return self._model


def _features(frame, cols):
    import numpy as np

    out = []
    for c in cols:
        values = frame[c].to_numpy()
        if len(values) and isinstance(values[0], (list, np.ndarray)):
            values = np.stack([np.asarray(v) for v in values])
        out.append(values)
    return out
