"""The launchers' shared choice of a failed job's cause."""
from horovod.common.exceptions import (HorovodInternalError,
                                       HorovodInvalidArgumentError)
from horovod.runner.run_api import cause_first


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
