"""Helpers that launch multi-rank jobs for the tests. Every launch has a
timeout, so a hang fails the test instead of stalling the suite."""

import os
import secrets
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers")


def worker(name):
    return os.path.join(WORKERS, name)


def horovodrun(np, script, *args, timeout=240, env=None):
    """Runs `horovodrun -np N python script args`; returns CompletedProcess."""
    cmd = [sys.executable, "-m", "horovod.runner", "-np", str(np),
           sys.executable, worker(script)] + [str(a) for a in args]
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=full_env)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_ranks(np, script, *args, env=None, rank_env=None, port=None,
                secret=None, ranks=None):
    """Starts the ranks directly (no launcher supervising them), so a test
    can watch each survivor when a peer dies. `rank_env(r)` adds variables
    for rank r; `ranks` starts only those (the rest never come). Returns the
    Popen list."""
    port = port or free_port()
    secret = secret or secrets.token_hex(16)
    procs = []
    for r in (range(np) if ranks is None else ranks):
        e = dict(os.environ)
        e.update({"HOROVOD_RANK": str(r), "HOROVOD_SIZE": str(np),
                  "HOROVOD_LOCAL_RANK": str(r), "HOROVOD_LOCAL_SIZE": str(np),
                  "HOROVOD_CONTROLLER_ADDR": "127.0.0.1",
                  "HOROVOD_CONTROLLER_PORT": str(port),
                  "HOROVOD_SECRET_KEY": secret, "PYTHONUNBUFFERED": "1"})
        e.update(env or {})
        e.update(rank_env(r) if rank_env else {})
        procs.append(subprocess.Popen(
            [sys.executable, worker(script)] + [str(a) for a in args], env=e,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def shm_segments_of(pids):
    """Shared-memory segments still named after any of these processes."""
    return [f for f in os.listdir("/dev/shm")
            if any(f.startswith("hvd-%d-" % p) for p in pids)]


def collect(procs, timeout=120):
    out = []
    for p in procs:
        try:
            so, se = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("rank did not finish within %s s" % timeout)
        out.append((p.returncode, so, se))
    return out


def assert_ok(result):
    assert result.returncode == 0, (
        "job failed (rc=%d)\nstdout:\n%s\nstderr:\n%s"
        % (result.returncode, result.stdout[-6000:], result.stderr[-6000:]))
