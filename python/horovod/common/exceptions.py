"""Exception types, named as in upstream Horovod."""


class HorovodInternalError(RuntimeError):
    """A collective operation failed (a peer died, ranks disagreed, or the
    engine shut down)."""


class HorovodInvalidArgumentError(HorovodInternalError, ValueError):
    """A collective was given input it cannot run with (a scalar where a
    tensor is needed, alltoall splits that do not add up, a root outside the
    process set, ...). Nothing was sent. Upstream reports some of these as
    ValueError and others as HorovodInternalError once the ranks have
    negotiated; this error is both, so code written for either catches it."""


class HostsUpdatedInterrupt(RuntimeError):
    """Raised when the set of hosts of an elastic job changed."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync
