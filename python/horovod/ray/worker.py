"""The process behind each rank of a `RayExecutor`: a Ray actor that
reports where it runs, takes its rank's environment, and runs the
functions the executor sends it. `hvd.init()` inside those functions joins
the job that environment describes.

Thread-safety: Ray runs an actor's methods one at a time.
"""

import os
import socket


class BaseHorovodWorker:
    """One rank. `executable`: the object built from `start()`'s
    executable_cls, handed to the functions of `execute`."""

    def __init__(self):
        self.executable = None
        self._reserve = None

    def node_info(self, nics):
        """Where this actor runs: host key, the address its rank listens
        on, and a port reserved there (the controller's, should this actor
        be rank 0) that stays held until the first function runs."""
        import ray

        from horovod.runner.placement import host_key, reserve_port

        addr = ray.util.get_node_ip_address()
        if nics:
            from horovod.runner.probe import nic_address
            addr = nic_address(nics)
        self._release()
        self._reserve = reserve_port(addr)
        return {"host": host_key(), "addr": addr,
                "port": self._reserve.getsockname()[1],
                "hostname": socket.gethostname(), "pid": os.getpid()}

    def setup(self, env, executable_cls=None, args=None, kwargs=None):
        os.environ.update(env)
        if executable_cls is not None:
            self.executable = executable_cls(*(args or ()), **(kwargs or {}))

    def _release(self):
        if self._reserve is not None:
            self._reserve.close()
            self._reserve = None

    def run(self, fn, args=(), kwargs=None):
        self._release()
        return fn(*args, **(kwargs or {}))

    def execute(self, fn):
        self._release()
        return fn(self.executable)

    def hostname(self):
        return socket.gethostname()
