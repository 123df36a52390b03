"""A rank of a fault-injection job (tests/python/test_faults.py).

argv[1] is the phase the test injects its fault into:
  allreduce  every rank loops over 64 MiB allreduces
  negotiate  the victim (FAULT_VICTIM) never submits; the others wait on it
  idle       nobody submits until half a second after the fault
  steady     small allreduces for a while (faults on a proxied connection)
  hold       init, one allreduce, then sleep (the launcher is killed)
  init       init only (some ranks are never started)
Each rank prints READY once warmed up. A survivor prints "RAISED <monotonic
time>" and lets the error propagate, so its last line is the exception."""

import os
import sys
import time

import torch

import horovod.torch as hvd

mode = sys.argv[1]
victim = int(os.environ.get("FAULT_VICTIM", "-1"))
if mode == "init":
    start = time.monotonic()
    try:
        hvd.init()
    except Exception:
        print("RAISED %.6f after %.2f s" % (time.monotonic(),
                                            time.monotonic() - start),
              flush=True)
        raise
    print("init OK", flush=True)
    sys.exit(0)

hvd.init()
r = hvd.rank()
hvd.allreduce(torch.ones(4), name="warmup")
if mode == "hold":
    with open(os.path.join(sys.argv[2], "pid.%d" % r), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
    sys.exit(0)
print("READY %d" % r, flush=True)
try:
    if mode == "allreduce":
        big = torch.ones(16 << 20)
        for i in range(1000):
            hvd.allreduce_(big, name="big.%d" % i)
    elif mode == "negotiate":
        if r == victim:
            time.sleep(120)
        hvd.allreduce(torch.ones(4), name="never_agreed")
    elif mode == "idle":
        time.sleep(120 if r == victim else 0.5)
        hvd.allreduce(torch.ones(4), name="after_idle")
    elif mode == "steady":
        for i in range(int(os.environ.get("FAULT_STEPS", "400"))):
            y = hvd.allreduce(torch.ones(256), op=hvd.Sum, name="steady.%d" % i)
            assert y[0].item() == hvd.size(), y[0]
            time.sleep(0.01)
        print("steady OK on rank %d" % r, flush=True)
        sys.exit(0)
    print("NO ERROR", flush=True)
    sys.exit(3)
except hvd.HorovodInternalError:
    print("RAISED %.6f" % time.monotonic(), flush=True)
    raise
