"""horovod.run's refusals and the launchers' shared choice of a failed
job's cause."""
import threading
import time

import pytest

import horovod
from horovod.common.exceptions import (HorovodInternalError,
                                       HorovodInvalidArgumentError)
from horovod.runner.run_api import cause_first, job_cause


def test_a_rank_whose_code_raised_comes_before_peers_it_failed():
    peer = (0, HorovodInternalError("Horovod has been shut down"))
    own = (1, KeyError("no such thing"))
    later = (2, ValueError("also raised"))
    assert cause_first([peer, own, later]) == [own, later, peer]
    # Bad input is the raising rank's own error, not a peer's.
    bad = (3, HorovodInvalidArgumentError("root 9 is outside the set"))
    assert cause_first([peer, bad]) == [bad, peer]
    # With only peers' errors, the order they came in stands.
    other = (1, HorovodInternalError("peer 2 died"))
    assert cause_first([peer, other]) == [peer, other]
    assert cause_first([]) == []


def test_horovod_run_names_the_rank_whose_code_raised():
    # {rank: (ok, value)}, as the ranks reported: rank 0's collective failed
    # because rank 2 raised; rank 1 returned.
    own = KeyError("no such thing")
    peer = HorovodInternalError("Horovod has been shut down")
    assert job_cause({0: (False, peer), 1: (True, 7), 2: (False, own)}) == (
        2, own)
    # Two ranks raised their own errors: the lower one is named.
    other = ValueError("also raised")
    assert job_cause({3: (False, other), 2: (False, own)}) == (2, own)
    # Only peers' errors: the lowest rank's.
    later = HorovodInternalError("peer 0 died")
    assert job_cause({1: (False, later), 0: (False, peer)}) == (0, peer)
    assert job_cause({0: (True, 1), 1: (True, 2)}) is None


@pytest.mark.parametrize("kwargs, words", [
    (dict(np=0), "-np must be a positive number of ranks"),
    (dict(np=2, hosts="localhost:1"), "-np 2 exceeds the 1 slots"),
    (dict(np=3, min_np=4), "-np 3 is below --min-np 4"),
    (dict(np=1, ssh_port=99999), "-p 99999 is not a port"),
    (dict(np=1, hosts="a:1", hostfile="h"), "give hosts or hostfile"),
])
def test_horovod_run_refuses_bad_settings_as_value_errors(kwargs, words):
    with pytest.raises(ValueError, match=words):
        horovod.run(lambda: 1, **kwargs)


@pytest.mark.parametrize("func, kwargs, error, words", [
    (5, {}, TypeError, "horovod.run: func must be callable, got int"),
    (abs, dict(args=5), TypeError, "args must be a tuple or list of func's "
     "positional arguments, got int"),
    (abs, dict(kwargs=[1]), TypeError, "kwargs must be a dict of func's "
     "keyword arguments, got list"),
    (abs, dict(args=(threading.Lock(),)), TypeError, "func and its "
     "arguments cannot be sent to the ranks: TypeError: cannot pickle"),
    (abs, dict(np="2"), ValueError, r"np='2' is not an integer"),
    (abs, dict(np=2, min_np=1.5), ValueError, "min_np=1.5 is not an integer"),
])
def test_horovod_run_refuses_what_it_cannot_send_before_anything_starts(
        func, kwargs, error, words):
    started = time.monotonic()
    with pytest.raises(error, match=words):
        horovod.run(func, **kwargs)
    assert time.monotonic() - started < 5  # no rank was started


def test_a_result_that_cannot_be_sent_back_is_named_on_the_rank_too(capfd):
    with pytest.raises(RuntimeError, match="its result cannot be sent back: "
                                           "cannot pickle"):
        horovod.run(threading.Lock, np=1)
    assert "rank 0 raised RuntimeError: rank 0: its result cannot be sent " \
        "back" in capfd.readouterr().err
