"""Keeps torch.compile (TorchDynamo) from tracing into Horovod's Python.

A compiled function that calls a collective (``hvd.allreduce(loss)`` in a
train step, a Keras train step compiled by torch) must run the collective
as it runs eagerly: Dynamo inlining our Python would specialise on its
counters and handle tables, and it calls nanobind's bound methods without
their object. Dynamo treats code under its skip directories as opaque: a
call into it becomes a graph break and runs eagerly. Horovod's package is
added there when Dynamo's rules are first imported (importing Dynamo costs
about a second, which a script that never compiles must not pay), or at
once when they already are.

Thread-safety: install() runs at import, under Python's import lock.
"""

import importlib.abc
import importlib.util
import sys

_RULES = "torch._dynamo.trace_rules"


def _skip_horovod(rules):
    add = getattr(rules, "add", None)
    if add is None:  # a torch whose Dynamo has no skip directories
        return
    try:
        add("horovod")
    except Exception:  # noqa: BLE001 - tracing stays as torch has it
        pass


class _RulesWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when Dynamo's rules are imported, lets the
    other finders find them and adds Horovod once they have run."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _RULES:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            _skip_horovod(module)
        loader.exec_module = exec_module
        return spec


def install():
    if _RULES in sys.modules:
        _skip_horovod(sys.modules[_RULES])
    elif not any(isinstance(f, _RulesWatcher) for f in sys.meta_path):
        sys.meta_path.insert(0, _RulesWatcher())
