"""Horovod: distributed training with a native C++ engine.

Import the framework module you use, e.g. ``import horovod.torch as hvd``.
"""

__version__ = "0.1.0"
