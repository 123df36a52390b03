"""horovod.keras on each Keras 3 backend: one pytest case per behaviour and
backend, each asserted on every rank of a real horovodrun job."""

import pytest

from conftest import assert_check_passed, check_names, example_accuracy

pytest.importorskip("keras")


@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
@pytest.mark.parametrize("check", check_names("keras"))
def test_keras(check, backend):
    pytest.importorskip({"tensorflow": "tensorflow", "torch": "torch",
                         "jax": "jax"}[backend])
    assert_check_passed("keras", check, 2, {"KERAS_BACKEND": backend})


@pytest.mark.slow
@pytest.mark.parametrize("check", check_names("keras"))
def test_keras_three_ranks(check):
    assert_check_passed("keras", check, 3, {"KERAS_BACKEND": "tensorflow"})


@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
def test_digits_example_on_each_backend(backend):
    acc = example_accuracy(2, "keras_digits.py", "--epochs", "4",
                           env={"KERAS_BACKEND": backend})
    assert float(acc) > 0.8, acc
