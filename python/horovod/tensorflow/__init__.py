"""horovod.tensorflow: Horovod's TensorFlow 2 API on the native engine."""

try:
    import tensorflow as _tf  # noqa: F401
except ImportError as e:
    raise ImportError(
        "horovod.tensorflow needs TensorFlow, which is not installed: "
        "pip install tensorflow-cpu==2.21.0") from e

from horovod.tensorflow.mpi_ops import *  # noqa: F401,F403
from horovod.tensorflow.compression import Compression  # noqa: F401
