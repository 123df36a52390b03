"""Exception types, named as in upstream Horovod."""


class HorovodInternalError(RuntimeError):
    """A collective operation failed (a peer died, ranks disagreed, or the
    engine shut down)."""


class HostsUpdatedInterrupt(RuntimeError):
    """Raised when the set of hosts of an elastic job changed."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync
