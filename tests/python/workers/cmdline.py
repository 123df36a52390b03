"""No process's command line carries the job secret."""

import os

import horovod.torch as hvd

hvd.init()
secret = os.environ["HOROVOD_SECRET_KEY"]
assert len(secret) >= 32
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            assert secret.encode() not in f.read(), "secret in cmdline of %s" % pid
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
hvd.barrier()
print("cmdline OK on rank %d" % hvd.rank())
hvd.shutdown()
