"""horovod.tensorflow.elastic: elastic training for TensorFlow 2 (eager):
the state of a list of tf.Variables (`TensorFlowState`) or of a Keras model
and its optimizer (`TensorFlowKerasState`), and the retry loop `run`."""

import numpy as np

from horovod.common.elastic import ObjectState, run  # noqa: F401
from horovod.common.exceptions import HostsUpdatedInterrupt  # noqa: F401
from horovod.common.topology import rank
from horovod.tensorflow.functions import broadcast_object, broadcast_variables

__all__ = ["HostsUpdatedInterrupt", "TensorFlowKerasState",
           "TensorFlowState", "run"]


class TensorFlowState(ObjectState):
    """A list of tf.Variables (eager), plus plain values as ObjectState:
    saved as NumPy copies, restored by assigning them, synced by
    broadcasting rank 0's values."""

    def __init__(self, variables=None, session=None, **kwargs):
        if session is not None:
            raise ValueError("TensorFlowState(session=...): TensorFlow 1 "
                             "sessions are not supported; give the "
                             "variables of an eager program")
        self.variables = list(variables or [])
        self._saved_values = []
        super().__init__(bcast_object=broadcast_object, get_rank=rank,
                         **kwargs)

    def save(self):
        self._saved_values = [np.array(v.numpy(), copy=True)
                              for v in self.variables]
        super().save()

    def restore(self):
        for v, value in zip(self.variables, self._saved_values):
            v.assign(value)
        super().restore()

    def sync(self):
        broadcast_variables(self.variables, root_rank=0)
        self.save()
        super().sync()


def TensorFlowKerasState(model, optimizer=None, backend=None, **kwargs):
    """The state of a Keras model and its optimizer under TensorFlow:
    horovod.keras.elastic.KerasState (`backend` is accepted for upstream's
    signature; Keras 3 has one per process)."""
    from horovod.keras.elastic import KerasState
    return KerasState(model, optimizer=optimizer, **kwargs)
