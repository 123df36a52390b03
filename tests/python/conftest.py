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


def pytest_addoption(parser):
    parser.addoption(
        "--run-slow", action="store_true", default=False,
        help="also run the tests marked slow (scripts/test.sh --all)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: a costlier repeat of behaviour that tests of the "
        "default run already cover (another rank count, backend or "
        "transport, or hosts); runs with --run-slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: runs with --run-slow "
                                   "(scripts/test.sh --all)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


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


def example_accuracy(np, script, *args, env=None):
    """Runs examples/<script> through horovodrun and returns the number its
    rank 0 prints after "final test accuracy:" (as printed)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    cmd = [sys.executable, "-m", "horovod.runner", "-np", str(np),
           sys.executable, os.path.join(root, "examples", script)]
    full_env = dict(os.environ)
    full_env.update(env or {})
    out = subprocess.run(cmd + [str(a) for a in args], capture_output=True,
                         text=True, timeout=280, env=full_env)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [l for l in out.stdout.splitlines() if "final test accuracy:" in l]
    assert lines, out.stdout[-2000:]
    return lines[0].split("final test accuracy:")[1].split()[0]


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


def process_alive(pid):
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


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


# -- check modules: one pytest case per check, one job per module ------------

def check_names(module):
    """The check_* functions of workers/checks_<module>.py, in order (read
    from the source, so collecting needs neither torch nor horovod)."""
    import ast
    with open(worker("checks_%s.py" % module)) as f:
        tree = ast.parse(f.read())
    return [node.name for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("check_")]


def parse_checks(outputs):
    """{check: {rank: (status, detail lines)}} from each rank's stdout."""
    results = {}
    for rank, text in enumerate(outputs):
        for line in text.splitlines():
            line = line.split(":", 1)[1] if line.startswith("[") else line
            if line.startswith("CHECK "):
                _, name, status = line.split(" ", 2)
                results.setdefault(name, {})[rank] = (status, [])
            elif line.startswith("CHECK-DETAIL "):
                _, name, detail = (line.split(" ", 2) + [""])[:3]
                results.setdefault(name, {}).setdefault(
                    rank, ("FAIL", []))[1].append(detail)
    return results


_CHECK_RUNS = {}


def run_checks(module, np, env=None):
    """Runs a check module once per (module, np, env) through horovodrun
    and caches what every rank reported. A failing check leaves the others
    running: the stall shutdown is short so a rank left waiting on a failed
    peer gives up quickly."""
    key = (module, np, tuple(sorted((env or {}).items())))
    if key not in _CHECK_RUNS:
        full_env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "5",
                    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "20"}
        full_env.update(env or {})
        res = horovodrun(np, "checks.py", module, env=full_env, timeout=280)
        per_rank = ["\n".join(l.split(":", 1)[1] for l in res.stdout.splitlines()
                              if l.startswith("[%d]<stdout>:" % r))
                    for r in range(np)]
        _CHECK_RUNS[key] = (res, parse_checks(per_rank))
    return _CHECK_RUNS[key]


def assert_check_passed(module, check, np, env=None):
    res, results = run_checks(module, np, env)
    got = results.get(check, {})
    failed = {r: got.get(r, ("MISSING", [])) for r in range(np)
              if got.get(r, ("MISSING",))[0] != "PASS"}
    if failed:
        lines = []
        for r, (status, detail) in sorted(failed.items()):
            lines.append("rank %d: %s" % (r, status))
            lines.extend("  " + d for d in detail[-25:])
        lines.append("job exit code %s; stderr tail:" % res.returncode)
        lines.extend(res.stderr.splitlines()[-20:])
        pytest.fail("\n".join(lines), pytrace=False)
