"""Runs the check_* functions of a check module on every rank, in the
order they are defined, and prints one line per check:
``CHECK <name> PASS`` or ``CHECK <name> FAIL``, followed on failure by the
traceback as ``CHECK-DETAIL <name> <line>`` lines. A barrier between checks
keeps the ranks together, so each check starts from a quiet engine.

Usage: python checks.py <module> (a file checks_<module>.py beside this
one). Each pytest case then asserts one check on every rank."""

import importlib
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
module = importlib.import_module("checks_" + sys.argv[1])

# The runner keeps to the framework-neutral core: a check module imports
# the one framework it checks, and every adapter shares this engine.
from horovod.common.ops import process_collectives  # noqa: E402

core = process_collectives()

checks = [(name, fn) for name, fn in vars(module).items()
          if name.startswith("check_") and callable(fn)]
for name, fn in checks:
    try:
        fn()
        print("CHECK %s PASS" % name, flush=True)
    except BaseException:  # noqa: B902 - report and go on to the next check
        print("CHECK %s FAIL" % name, flush=True)
        for line in traceback.format_exc().splitlines():
            print("CHECK-DETAIL %s %s" % (name, line), flush=True)
    try:
        core.barrier()
    except Exception as e:  # the engine is gone: the rest cannot run
        print("CHECK-ABORT after %s: %s" % (name, e), flush=True)
        break
core.basics.shutdown()
