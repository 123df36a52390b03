import sys
import time

import horovod.torch as hvd

hvd.init()
print("hello from %d" % hvd.rank(), flush=True)
if hvd.rank() == 1:
    sys.stderr.write("rank 1 failing on purpose\n")
    sys.exit(7)
time.sleep(30)
