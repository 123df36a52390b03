"""Timeline worker. `static`: runs steps until the file named by
HOROVOD_TIMELINE holds at least `min_bytes` bytes, checking results, so the
test can parse the file while the job is still running. `dynamic PATH`:
steps named before/during/after around hvd.start_timeline(PATH) and
hvd.stop_timeline()."""

import os
import sys
import time

import torch

import horovod.torch as hvd
from common import close


def step(prefix, i):
    n = hvd.size()
    grads = [torch.full((100 + k,), float(hvd.rank() + 1)) for k in range(4)]
    hs = [hvd.allreduce_async_(g, op=hvd.Sum, name="%s.grad.%d" % (prefix, k))
          for k, g in enumerate(grads)]
    for h, g in zip(hs, grads):
        hvd.synchronize(h)
        close(g, torch.full_like(g, n * (n + 1) / 2))
    got = hvd.allgather(torch.ones(1, 2) * hvd.rank(), name="%s.gather" % prefix)
    close(got[:, 0], torch.arange(n, dtype=torch.float32))


def main():
    hvd.init()
    me = hvd.rank()
    mode = sys.argv[1]
    if mode == "static":
        path, min_bytes = os.environ["HOROVOD_TIMELINE"], int(sys.argv[2])
        deadline = time.time() + 60
        i = 0
        while True:
            step("static", i)
            i += 1
            done = torch.tensor([1 if i >= 20 and os.path.exists(path) and
                                 os.path.getsize(path) >= min_bytes else 0])
            # Every rank stops at the same step: rank 0 sees the file.
            done = hvd.broadcast(done, 0, name="static.done")
            if int(done) or time.time() > deadline:
                break
            time.sleep(0.005)
    else:
        path = sys.argv[2]
        for i in range(5):
            step("before", i)
        if me == 0:  # only rank 0 writes, so only rank 0 can fail
            try:
                hvd.start_timeline("/nonexistent-dir/t.json")
                raise AssertionError("an unwritable path was accepted")
            except ValueError as e:
                assert "nonexistent-dir" in str(e), e
        hvd.start_timeline(path, mark_cycles=True)
        for i in range(5):
            step("during", i)
        hvd.stop_timeline()
        for i in range(5):
            step("after", i)
    hvd.shutdown()
    print("timeline OK on rank %d" % me, flush=True)


if __name__ == "__main__":
    main()
