"""Horovod: distributed training with a native C++ engine.

Import the framework module you use, e.g. ``import horovod.torch as hvd``.

``__version__`` is the upstream Horovod release whose Python API this
package implements (libraries that integrate with Horovod gate features on
it); ``__engine_version__`` is this engine's own release.
"""

import importlib.abc
import sys

__version__ = "0.28.1"
__engine_version__ = "0.1.0"

# Upstream modules this build does not provide yet: importing one fails with
# one line saying so, instead of a bare "No module named ...".
_NOT_BUILT = {
    "horovod.mxnet": "the MXNet adapter",
}


class _NotBuiltFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        parts = fullname.split(".")
        for k in range(2, len(parts) + 1):
            top = ".".join(parts[:k])
            what = _NOT_BUILT.get(top)
            if what is not None:
                raise ModuleNotFoundError(
                    "%s is not available: %s is not part of this build yet "
                    "(horovod.torch, horovod.tensorflow, horovod.keras, "
                    "horovod.jax, horovod.spark and horovod.ray are)"
                    % (top, what), name=fullname)
        return None


if not any(isinstance(f, _NotBuiltFinder) for f in sys.meta_path):
    sys.meta_path.append(_NotBuiltFinder())


def run(*args, **kwargs):
    """Runs a function on every rank of a job and returns each rank's
    result (horovod.runner.run)."""
    from horovod.runner.run_api import run as _run
    return _run(*args, **kwargs)
