"""horovod.torch.elastic's worker side, through real horovodrun jobs: one
pytest case per check of workers/checks_elastic.py, asserted on every
rank."""

import pytest

from conftest import assert_check_passed, check_names


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("check", check_names("elastic"))
def test_elastic_state(check, np):
    assert_check_passed("elastic", check, np)
