import sys

from horovod.runner.launch import main

sys.exit(main())
