"""horovod.tensorflow against upstream's semantics: one pytest case per
behaviour, each asserted on every rank of a real horovodrun job (the ranks
of one module run as one job per rank count)."""

import glob
import os
import subprocess

import pytest

from conftest import assert_check_passed, check_names, example_accuracy

pytest.importorskip("tensorflow")


@pytest.mark.parametrize("np", [2, pytest.param(3, marks=pytest.mark.slow)])
@pytest.mark.parametrize("check", check_names("tf_collectives"))
def test_collectives(check, np):
    assert_check_passed("tf_collectives", check, np)


@pytest.mark.parametrize("np", [2, pytest.param(3, marks=pytest.mark.slow)])
@pytest.mark.parametrize("check", check_names("tf_training"))
def test_gradients_and_training(check, np):
    assert_check_passed("tf_training", check, np)


@pytest.mark.parametrize("check", check_names("tf_errors"))
def test_errors(check):
    assert_check_passed("tf_errors", check, 2)


def _symbols(lib, which):
    out = subprocess.run(["nm", "-D", which, lib], capture_output=True,
                         text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def test_nothing_shipped_links_tensorflow():
    """No shipped library links TensorFlow or uses its C++ ABI; the op
    library leaves only functions of TensorFlow's stable C API (TF_*) to
    be resolved when TensorFlow loads it, and exports only its binding and
    its eager plan registration."""
    import horovod
    root = os.path.dirname(horovod.__file__)
    libs = glob.glob(os.path.join(root, "**", "*.so"), recursive=True)
    op_library = os.path.join(root, "tensorflow", "_tf_ops.so")
    assert op_library in libs, libs
    for lib in libs:
        deps = subprocess.run(["ldd", lib], capture_output=True,
                              text=True).stdout
        assert "tensorflow" not in deps, lib
        for which in ("--defined-only", "--undefined-only"):
            assert not [s for s in _symbols(lib, which)
                        if "tensorflow" in s], (lib, which)
    undefined = [s for s in _symbols(op_library, "--undefined-only")
                 if "@" not in s and not s.startswith("_")]
    assert undefined and all(s.startswith("TF_") for s in undefined), \
        undefined
    exported = [s for s in _symbols(op_library, "--defined-only")
                if not s.startswith("_")]
    assert exported == ["horovod_tf_bind", "horovod_tf_plan"], exported


def test_digits_example_matches_one_process():
    acc2 = example_accuracy(2, "tensorflow2_digits.py", "--epochs", "3")
    assert float(acc2) > 0.8
    assert acc2 == example_accuracy(1, "tensorflow2_digits.py", "--epochs",
                                    "3")
