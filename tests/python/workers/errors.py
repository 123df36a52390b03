"""Local errors at enqueue, cross-rank mismatches failing on every rank
followed by a working op, and init after shutdown. Needs np >= 2."""

import torch

import horovod.torch as hvd
from common import close

try:
    hvd.rank()
    raise AssertionError("rank() before init should fail")
except ValueError as e:
    assert "Horovod has not been initialized; use hvd.init()." in str(e), e

hvd.init()
r, n = hvd.rank(), hvd.size()
assert n >= 2


def expect(exc_type, fragment, fn):
    try:
        fn()
    except exc_type as e:
        assert fragment in str(e), "%r lacks %r" % (str(e), fragment)
        return str(e)
    raise AssertionError("expected %s containing %r" % (exc_type.__name__, fragment))


# cross-rank mismatches: error on every rank naming both values and ranks
msg = expect(hvd.HorovodInternalError, "Mismatched allreduce tensor shapes",
             lambda: hvd.allreduce(torch.ones(r + 2), name="shape"))
assert "rank 0" in msg and "rank 1" in msg and "[2]" in msg and "[3]" in msg, msg
assert isinstance(hvd.HorovodInternalError("x"), RuntimeError)
dt = torch.float32 if r == 0 else torch.float64
msg = expect(hvd.HorovodInternalError, "Mismatched data types",
             lambda: hvd.allreduce(torch.ones(3, dtype=dt), name="dtype"))
assert "float32" in msg and "float64" in msg, msg
expect(hvd.HorovodInternalError, "Mismatched reduce operations",
       lambda: hvd.allreduce(torch.ones(3), name="op",
                             op=hvd.Sum if r == 0 else hvd.Max))
expect(hvd.HorovodInternalError, "Mismatched broadcast root",
       lambda: hvd.broadcast(torch.ones(3), 0 if r == 0 else 1, name="root"))
expect(hvd.HorovodInternalError, "Mismatched prescale/postscale",
       lambda: hvd.allreduce(torch.ones(3), name="scale", prescale_factor=1.0 + r))
expect(hvd.HorovodInternalError, "Mismatched operations",
       lambda: hvd.allreduce(torch.ones(2), name="kind") if r == 0
       else hvd.allgather(torch.ones(2), name="kind"))
expect(hvd.HorovodInternalError, "Mismatched allgather tensor shapes",
       lambda: hvd.allgather(torch.ones(2, r + 1), name="agshape"))
# the job keeps working
close(hvd.allreduce(torch.ones(3), op=hvd.Sum, name="after"), torch.full((3,), float(n)))

# local errors: raised at once on the calling rank, nothing enqueued
# A name stays in flight on rank 0 until the others submit it too.
if r == 0:
    h = hvd.allreduce_async(torch.ones(2), name="dup")
    msg = expect(ValueError, "Duplicate tensor name 'dup'",
                 lambda: hvd.allreduce_async(torch.ones(2), name="dup"))
    assert "rank 0" in msg, msg
hvd.broadcast(torch.ones(1), 0, name="go")
if r == 0:
    hvd.synchronize(h)
else:
    hvd.allreduce(torch.ones(2), name="dup")
expect(ValueError, "root rank %d is out of range" % n,
       lambda: hvd.broadcast(torch.ones(2), n))
expect(ValueError, "splits sum to", lambda: hvd.alltoall(torch.ones(5), splits=[1] * n))
expect(ValueError, "dtype", lambda: hvd.allreduce(torch.ones(2, dtype=torch.complex64)))
expect(ValueError, "Adasum", lambda: hvd.allreduce(torch.ones(2), op=hvd.Adasum))
expect(ValueError, "bool", lambda: hvd.allreduce(torch.ones(2, dtype=torch.bool)))
expect(ValueError, "unknown or already synchronized handle",
       lambda: hvd.synchronize(12345678))
close(hvd.allreduce(torch.ones(3), op=hvd.Sum, name="after2"), torch.full((3,), float(n)))

# init after shutdown works again
hvd.shutdown()
assert not hvd.is_initialized()
expect(ValueError, "has not been initialized", lambda: hvd.allreduce(torch.ones(1)))
hvd.init()
close(hvd.allreduce(torch.ones(3), op=hvd.Sum, name="reinit"), torch.full((3,), float(n)))
print("errors OK on rank %d" % r)
hvd.shutdown()
