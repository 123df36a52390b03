"""Horovod's Keras callbacks (Keras 3, any backend)."""

from horovod._keras.callbacks import (  # noqa: F401
    BestModelCheckpoint, BroadcastGlobalVariablesCallback,
    LearningRateScheduleCallback, LearningRateWarmupCallback,
    MetricAverageCallback)

__all__ = ["BestModelCheckpoint", "BroadcastGlobalVariablesCallback",
           "LearningRateScheduleCallback", "LearningRateWarmupCallback",
           "MetricAverageCallback"]
