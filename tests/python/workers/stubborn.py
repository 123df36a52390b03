"""Ignores SIGINT (and SIGTERM with argv[2] == "term"), records its pid in
the directory argv[1], and sleeps: a rank that Ctrl-C alone cannot stop."""

import os
import signal
import sys
import time

signal.signal(signal.SIGINT, signal.SIG_IGN)
if len(sys.argv) > 2 and sys.argv[2] == "term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(os.path.join(sys.argv[1], "pid.%s" % os.environ["HOROVOD_RANK"]),
          "w") as f:
    f.write(str(os.getpid()))
time.sleep(120)
