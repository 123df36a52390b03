"""horovodrun and its Python form, ``horovod.runner.run``."""

from horovod.runner.run_api import run  # noqa: F401
