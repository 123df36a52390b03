import os
import sys
import time

import horovod.torch as hvd

hvd.init()
with open(os.path.join(sys.argv[1], "pid.%d" % hvd.rank()), "w") as f:
    f.write(str(os.getpid()))
time.sleep(120)
