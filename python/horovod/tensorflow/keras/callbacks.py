"""Horovod's Keras callbacks (Keras 3, any backend): horovod.keras's."""

from horovod.keras.callbacks import *  # noqa: F401,F403
