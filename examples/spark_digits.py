"""Fit a digits classifier on a Spark DataFrame with a Horovod Estimator,
then add its predictions to the DataFrame with the fitted model.

    python examples/spark_digits.py                      # local[2]
    python examples/spark_digits.py --master spark://host:7077 --num-proc 4
    python examples/spark_digits.py --framework keras

The data is scikit-learn's digits (shipped with it, no download), turned
into a DataFrame with a `features` vector column, a `label` column and an
`is_test` column marking a quarter of the rows held out. The Estimator
writes the training rows to the store as Parquet, trains on --num-proc
Spark tasks at once (one barrier stage) and returns a Model; its
`transform` adds `label__output`, the ten class scores of each row.
"""

import argparse
import tempfile

import numpy as np


def digits_frame(spark, seed):
    from pyspark.ml.linalg import Vectors
    from sklearn.datasets import load_digits

    digits = load_digits()
    held_out = np.random.default_rng(seed).random(len(digits.target)) < 0.25
    rows = [(Vectors.dense(digits.data[i] / 16.0), int(digits.target[i]),
             bool(held_out[i])) for i in range(len(digits.target))]
    return spark.createDataFrame(rows, ["features", "label", "is_test"])


def torch_estimator(args, store):
    import torch

    from horovod.spark.torch import TorchEstimator

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    return TorchEstimator(
        num_proc=args.num_proc, model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=args.lr,
                                  momentum=0.9),
        loss=torch.nn.functional.cross_entropy, store=store,
        feature_cols=["features"], label_cols=["label"],
        batch_size=args.batch_size, epochs=args.epochs,
        random_seed=args.seed, verbose=1)


def keras_estimator(args, store):
    import keras

    from horovod.spark.keras import KerasEstimator

    keras.utils.set_random_seed(args.seed)
    model = keras.Sequential([keras.Input((64,)),
                              keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(10)])
    return KerasEstimator(
        num_proc=args.num_proc, model=model,
        optimizer=keras.optimizers.SGD(args.lr, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"], store=store, feature_cols=["features"],
        label_cols=["label"], batch_size=args.batch_size, epochs=args.epochs,
        random_seed=args.seed, verbose=0)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--num-proc", type=int, default=2)
    p.add_argument("--framework", choices=["torch", "keras"], default="torch")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--store", help="the store's directory (default: a new "
                   "temporary one); every executor must see it")
    args = p.parse_args()

    from pyspark.sql import SparkSession

    from horovod.spark.common.store import Store

    spark = (SparkSession.builder.master(args.master)
             .appName("horovod-spark-digits")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        df = digits_frame(spark, args.seed)
        store = Store.create(args.store or tempfile.mkdtemp(
            prefix="horovod-store-"))
        make = torch_estimator if args.framework == "torch" \
            else keras_estimator
        model = make(args, store).fit(df.where("not is_test"))
        print("training loss by epoch: %s" % ", ".join(
            "%.4f" % v for v in model.getHistory()["loss"]))
        scored = model.transform(df.where("is_test")).toPandas()
        predicted = np.stack(scored["label__output"].to_numpy()).argmax(1)
        accuracy = (predicted == scored["label"].to_numpy()).mean()
        print("final test accuracy: %.4f (%s, %d ranks, store %s)"
              % (accuracy, args.framework, args.num_proc, store.prefix_path))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
