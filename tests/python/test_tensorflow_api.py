"""horovod.tensorflow against upstream's semantics: one pytest case per
behaviour, each asserted on every rank of a real horovodrun job (the ranks
of one module run as one job per rank count)."""

import glob
import os
import subprocess

import pytest

from conftest import assert_check_passed, check_names, example_accuracy

pytest.importorskip("tensorflow")


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("check", check_names("tf_collectives"))
def test_collectives(check, np):
    assert_check_passed("tf_collectives", check, np)


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("check", check_names("tf_training"))
def test_gradients_and_training(check, np):
    assert_check_passed("tf_training", check, np)


@pytest.mark.parametrize("check", check_names("tf_errors"))
def test_errors(check):
    assert_check_passed("tf_errors", check, 2)


def test_nothing_shipped_links_tensorflow():
    import horovod
    libs = glob.glob(os.path.join(os.path.dirname(horovod.__file__), "*.so"))
    assert libs
    for lib in libs:
        syms = subprocess.run(["nm", "-D", "--defined-only", lib],
                              capture_output=True, text=True).stdout
        deps = subprocess.run(["ldd", lib], capture_output=True,
                              text=True).stdout
        assert "tensorflow" not in syms and "tensorflow" not in deps, lib



def test_digits_example_matches_one_process():
    acc2 = example_accuracy(2, "tensorflow2_digits.py", "--epochs", "3")
    assert float(acc2) > 0.8
    assert acc2 == example_accuracy(1, "tensorflow2_digits.py", "--epochs",
                                    "3")
