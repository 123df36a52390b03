"""horovod.torch.elastic's worker side, through real horovodrun jobs: one
pytest case per check of workers/checks_elastic.py, asserted on every
rank."""

import pytest

from conftest import assert_check_passed, check_names


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("check", check_names("elastic"))
def test_elastic_state(check, np):
    assert_check_passed("elastic", check, np)


@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
@pytest.mark.parametrize("check", check_names("keras_elastic"))
def test_keras_elastic_state(check, backend):
    pytest.importorskip("keras")
    pytest.importorskip(backend)
    assert_check_passed("keras_elastic", check, 2, {"KERAS_BACKEND": backend})
