"""horovod.spark.keras: KerasEstimator and KerasModel."""

from horovod.spark.keras.estimator import KerasEstimator, KerasModel

__all__ = ["KerasEstimator", "KerasModel"]
