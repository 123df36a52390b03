"""horovod.tensorflow.keras.elastic: upstream's name for
horovod.keras.elastic (tf.keras is Keras 3)."""

from horovod.keras.elastic import *  # noqa: F401,F403
