"""The last rank kills itself in the middle of a large allreduce; every
survivor must raise HorovodInternalError and print how long it took."""

import os
import signal
import sys
import threading
import time

import torch

import horovod.torch as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
hvd.allreduce(torch.ones(4), name="warmup")
if r == n - 1:
    threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
start = time.monotonic()
try:
    for i in range(1000):
        hvd.allreduce_(torch.ones(4_000_000), name="big.%d" % i)
    print("NO ERROR", flush=True)
    sys.exit(3)
except hvd.HorovodInternalError as e:
    print("RAISED after %.2f s: %s" % (time.monotonic() - start, e), flush=True)
# Later operations fail the same way, at once.
try:
    hvd.allreduce(torch.ones(1), name="later")
    sys.exit(4)
except hvd.HorovodInternalError as e:
    print("LATER: %s" % e, flush=True)
    sys.exit(0)
