"""Exception types, named as in upstream Horovod."""


class HorovodInternalError(RuntimeError):
    """A collective operation failed (a peer died, ranks disagreed, or the
    engine shut down)."""

    # Exception's own constructor, which these errors use unchanged: raised
    # while TensorFlow's autograph traces a function, an error keeps its
    # type only when its __init__ is this one (else autograph re-raises a
    # StagingError that no `except` for the Horovod type catches).
    __init__ = Exception.__init__


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
