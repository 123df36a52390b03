"""horovodrun --check-build: what this build offers, in upstream's layout
(the frameworks found installed, the one controller and the CPU
operations)."""

import sys

import horovod


def _importable(module):
    """Whether `module` is installed, found without importing it (importing
    TensorFlow takes seconds)."""
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_build(out=sys.stdout):
    def mark(b):
        return "X" if b else " "
    try:
        from horovod import _core  # noqa: F401
        engine = True
    except Exception:
        engine = False
    frameworks = [("TensorFlow", "tensorflow"), ("PyTorch", "torch"),
                  ("Keras", "keras"), ("JAX", "jax")]
    lines = "".join("    [%s] %s\n" % (mark(engine and _importable(m)), name)
                    for name, m in frameworks)
    out.write(
        "Horovod v%s:\n\n"
        "Available Frameworks:\n"
        "%s"
        "    [ ] MXNet\n\n"
        "Available Controllers:\n"
        "    [ ] MPI\n"
        "    [ ] Gloo\n"
        "    [%s] TCP (native)\n\n"
        "Available Tensor Operations:\n"
        "    [ ] NCCL\n"
        "    [ ] DDL\n"
        "    [ ] CCL\n"
        "    [ ] MPI\n"
        "    [ ] Gloo\n"
        "    [%s] CPU (native ring/recursive doubling over TCP)\n"
        % (horovod.__version__, lines, mark(engine), mark(engine)))
