"""horovod.jax: one pytest case per behaviour, each asserted on every rank
of a real horovodrun job."""

import pytest

from conftest import assert_check_passed, check_names

pytest.importorskip("jax")
pytest.importorskip("optax")


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("check", check_names("jax"))
def test_jax(check, np):
    assert_check_passed("jax", check, np)
