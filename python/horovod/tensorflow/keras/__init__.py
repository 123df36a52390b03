"""horovod.tensorflow.keras: upstream's module for tf.keras, which in
TensorFlow 2.16+ is Keras 3; the same API as horovod.keras."""

from horovod.keras import *  # noqa: F401,F403
from horovod.keras import (DistributedOptimizer, allgather,  # noqa: F401
                           PartialDistributedOptimizer, allgather_object,
                           allreduce, broadcast, broadcast_object,
                           broadcast_variables, callbacks, load_model,
                           reducescatter)
from horovod.tensorflow.keras import elastic  # noqa: F401,E402
