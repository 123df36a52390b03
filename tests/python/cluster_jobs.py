"""Functions the Spark and Ray tests run as Horovod jobs, and helpers both
use. The test modules register this module for pickling by value, so
executors and actors need not import it."""

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def collectives(offset):
    """Every rank's view of a few collectives and of its placement."""
    import torch

    import horovod.torch as hvd

    hvd.init()
    r, n = hvd.rank(), hvd.size()
    total = hvd.allreduce(torch.tensor([float(r + offset)]), op=hvd.Sum)
    gathered = hvd.allgather(torch.tensor([[r, r]]))
    root = hvd.broadcast(torch.tensor([r * 10 + 7]), root_rank=1)
    split = hvd.alltoall(torch.arange(n) + 100 * r)
    print("rank %d of %d says hello" % (r, n))
    return {"rank": r, "size": n, "sum": total.item(),
            "gathered": gathered.tolist(), "root": root.item(),
            "split": split.tolist(),
            "placement": (hvd.local_rank(), hvd.local_size(),
                          hvd.cross_rank(), hvd.cross_size()),
            "my_var": os.environ.get("MY_VAR")}


def check_collectives(results, offset):
    """What `collectives(offset)` must return on two ranks of one host."""
    assert [r["rank"] for r in results] == [0, 1]
    for r, res in enumerate(results):
        assert res["size"] == 2
        assert res["sum"] == 1 + 2 * offset
        assert res["gathered"] == [[0, 0], [1, 1]]
        assert res["root"] == 17
        assert res["split"] == [r, 100 + r]
        # One host: both ranks share memory.
        assert res["placement"] == (r, 2, 0, 1)


def raise_on_rank_1():
    import torch

    import horovod.torch as hvd

    hvd.init()
    if hvd.rank() == 1:
        raise KeyError("no such thing")
    hvd.allreduce(torch.ones(1))


def allreduce_until_killed(flag):
    """Marks `flag<rank>` once running, then allreduces for 90 s."""
    import torch

    import horovod.torch as hvd

    hvd.init()
    open(flag + str(hvd.rank()), "w").close()
    deadline = time.time() + 90
    while time.time() < deadline:
        hvd.allreduce(torch.ones(1000))
    return "not killed"


def elastic_training(flag, steps, stop=None):
    """Counts committed steps in an hvd.elastic job; each step allreduces
    the step number, so a lost or repeated step shows in the total. Each
    rank marks `flag<rank>` once training; rank 0 writes the job's size to
    `flag`size at each step. Ends after `steps` steps, or at the step at
    which rank 0 sees the file `stop` (all ranks together). Returns (steps,
    total, size, the size at each step)."""
    import torch

    import horovod.torch as hvd

    hvd.init()
    model = torch.nn.Linear(1, 1)
    state = hvd.elastic.TorchState(model, step=0, total=0.0, sizes=[])

    @hvd.elastic.run
    def train(state):
        while state.step < steps:
            if not os.path.exists(flag + str(hvd.rank())):
                open(flag + str(hvd.rank()), "w").close()
            if hvd.rank() == 0:
                with open(flag + "size.tmp", "w") as f:
                    f.write(str(hvd.size()))
                os.replace(flag + "size.tmp", flag + "size")
            halt = float(hvd.rank() == 0 and stop is not None and
                         os.path.exists(stop))
            value, halt = hvd.allreduce(
                torch.tensor([float(state.step), halt]), op=hvd.Max,
                name="step").tolist()
            state.total += value
            state.sizes.append(hvd.size())
            state.step += 1
            state.commit()
            if halt:
                break
            time.sleep(0.02)
        return state.step, state.total, hvd.size(), state.sizes

    return train(state)


def job_size(flag):
    """The size rank 0 of elastic_training wrote last (0: none yet)."""
    try:
        with open(flag + "size") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def ranks_running(flag, ranks, timeout_s):
    """Waits until each of `ranks` has created `flag<rank>`; False if they
    have not within timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not all(os.path.exists(flag + str(r)) for r in ranks):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def command_has(process, text):
    """Whether a psutil process's command line holds `text` (False for
    one that is gone or a zombie)."""
    import psutil
    try:
        return text in " ".join(process.cmdline())
    except psutil.Error:
        return False


def example_accuracy(script, *args, env=None):
    """Runs examples/<script> with python; the accuracy it prints after
    "final test accuracy:"."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples",
                                                       script)] +
                         [str(a) for a in args], capture_output=True,
                         text=True, timeout=280,
                         env=dict(os.environ, **(env or {})))
    assert out.returncode == 0, out.stderr[-3000:]
    line = [l for l in out.stdout.splitlines()
            if l.startswith("final test accuracy:")]
    assert line, out.stdout[-2000:]
    return float(line[0].split()[3])
