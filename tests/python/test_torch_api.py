"""horovod.torch against upstream's semantics: one pytest case per
behaviour, each asserted on every rank of a real horovodrun job. The ranks
of one module run as one job (per rank count); each case reads its own
check's result from it."""

import subprocess
import sys

import pytest

from conftest import assert_check_passed, check_names, example_accuracy


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("check", check_names("collectives"))
def test_collectives(check, np):
    assert_check_passed("collectives", check, np)


@pytest.mark.parametrize("check", check_names("collectives"))
def test_collectives_over_tcp_only(check):
    assert_check_passed("collectives", check, 3, {"HOROVOD_SHM_DISABLE": "1"})


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("check", check_names("autograd"))
def test_gradients(check, np):
    assert_check_passed("autograd", check, np)


@pytest.mark.parametrize("check", check_names("compile"))
def test_under_torch_compile(check):
    assert_check_passed("compile", check, 2)


@pytest.mark.parametrize("first", ["torch._dynamo", "horovod.torch"])
def test_dynamo_leaves_horovod_untraced_whichever_comes_first(first):
    code = """
import importlib, sys
importlib.import_module(sys.argv[1])
import torch, horovod.torch, torch._dynamo.trace_rules as rules
print(rules.check_file(horovod.torch.mpi_ops.__file__).skipped,
      rules.check_file(horovod.common.ops.__file__).skipped,
      rules.check_file("/home/user/train.py").skipped)
"""
    out = subprocess.run([sys.executable, "-c", code, first],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "True", "False"], out.stderr


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("check", check_names("optimizer"))
def test_optimizer(check, np):
    assert_check_passed("optimizer", check, np)


# Every optimizer check with the gradients' allreduces started from the
# hooks and from step(), whichever the host would pick.
@pytest.mark.parametrize("overlap", ["0", "1"])
@pytest.mark.parametrize("check", check_names("optimizer"))
def test_optimizer_with_gradient_overlap(check, overlap):
    assert_check_passed("optimizer", check, 2,
                        {"HOROVOD_GRADIENT_OVERLAP": overlap})


def test_gradient_overlap_default_follows_the_host():
    from horovod.torch.optimizer import host_is_full
    assert host_is_full(2, 2, 1, 2)
    assert host_is_full(2, 2, 2, 4)
    assert not host_is_full(2, 2, 1, 4)  # a core to spare for transfers
    assert not host_is_full(2, 4, 1, 2)  # ranks on other hosts too


@pytest.mark.parametrize("np", [2, 3, 4])
@pytest.mark.parametrize("check", check_names("adasum"))
def test_adasum(check, np):
    assert_check_passed("adasum", check, np)


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("check", check_names("join_ps"))
def test_join_and_process_sets(check, np):
    assert_check_passed("join_ps", check, np)


@pytest.mark.parametrize("check", check_names("errors"))
def test_errors(check):
    assert_check_passed("errors", check, 2)


@pytest.mark.parametrize("check", check_names("mismatch"))
def test_disagreeing_ranks_fail_fast(check):
    assert_check_passed("mismatch", check, 2)


def test_digits_example_matches_one_process():
    acc2 = example_accuracy(2, "pytorch_digits.py", "--epochs", "3")
    assert acc2 == example_accuracy(1, "pytorch_digits.py", "--epochs", "3")


def test_digits_example_trains_with_adasum():
    acc = example_accuracy(2, "pytorch_digits.py", "--epochs", "3", "--op",
                           "adasum")
    assert float(acc) >= 0.85, acc
