"""horovod.jax: one pytest case per behaviour, each asserted on every rank
of a real horovodrun job."""

import pytest

from conftest import assert_check_passed, check_names, example_accuracy

pytest.importorskip("jax")
pytest.importorskip("optax")


@pytest.mark.parametrize("np", [2, pytest.param(3, marks=pytest.mark.slow)])
@pytest.mark.parametrize("check", check_names("jax"))
def test_jax(check, np):
    assert_check_passed("jax", check, np)


def test_digits_example_matches_one_process():
    acc2 = example_accuracy(2, "jax_digits.py", "--epochs", "3")
    assert float(acc2) > 0.8
    assert acc2 == example_accuracy(1, "jax_digits.py", "--epochs", "3")
