"""What a user sees from horovodrun: progress bars as they are drawn (on a
terminal and off it), Ctrl-C that stops every rank, and one-line messages
for what this build does not provide. Every launch has a timeout."""

import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

from conftest import horovodrun, process_alive, worker

RUNNER = [sys.executable, "-m", "horovod.runner"]


def _on_a_terminal(*args):
    """Runs horovodrun -np 1 progress.py on a pseudo-terminal; returns what
    the terminal received and when each mark first arrived."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(RUNNER + ["-np", "1", sys.executable,
                                      worker("progress.py")] + list(args),
                            stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, close_fds=True)
    os.close(slave)
    seen = b""
    arrivals = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the launcher closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            for mark in (b"step 1/5", b"step 3/5", b"done"):
                if mark in seen and mark not in arrivals:
                    arrivals[mark] = time.monotonic()
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    assert proc.returncode == 0, seen
    return seen, arrivals


def test_progress_bar_updates_one_line_on_a_terminal():
    seen, arrivals = _on_a_terminal()
    # Each update arrives while the rank is still drawing, not all at exit,
    # and is drawn at once (not when the next update ends it).
    assert arrivals[b"done"] - arrivals[b"step 1/5"] > 1.2, arrivals
    assert arrivals[b"done"] - arrivals[b"step 3/5"] > 0.6, arrivals
    # Updates overwrite one line, rank prefix intact; the last one stays.
    assert b"\r[0]<stderr>:step 3/5\x1b[K" in seen, seen
    assert b"[0]<stderr>:step 1/5\n" not in seen.replace(b"\r\n", b"\n"), seen
    assert b"[0]<stderr>:step 5/5\x1b[K\r\n[0]<stdout>:done" in seen, seen


def test_blanked_progress_bar_leaves_no_empty_line_on_a_terminal():
    seen, _ = _on_a_terminal("blank")
    # tqdm(leave=False) blanks its bar; the next record takes its line.
    assert b"\r\x1b[K[0]<stdout>:done" in seen, seen


def test_progress_bar_is_a_line_per_update_off_a_terminal():
    res = horovodrun(2, "progress.py", timeout=60)
    assert res.returncode == 0, res.stderr
    for r in range(2):
        for step in range(1, 6):
            assert "[%d]<stderr>:step %d/5\n" % (r, step) in res.stderr, res.stderr
        assert "[%d]<stdout>:done\n" % r in res.stdout
    assert "\r" not in res.stderr


def _start_stubborn(tmp_path, np, mode=""):
    proc = subprocess.Popen(RUNNER + ["-np", str(np), sys.executable,
                                      worker("stubborn.py"), str(tmp_path),
                                      mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("pid.*"))) < np and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = [int(p.read_text()) for p in tmp_path.glob("pid.*")]
    assert len(pids) == np
    return proc, pids


def _wait(proc, timeout):
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("horovodrun still running %s s after Ctrl-C" % timeout)


def test_ctrl_c_escalates_when_ranks_ignore_it(tmp_path):
    proc, pids = _start_stubborn(tmp_path, 2)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _wait(proc, 30)
    took = time.monotonic() - start
    assert proc.returncode == 130, proc.returncode
    assert 4 < took < 15, took  # the SIGINT grace, then SIGTERM
    assert not any(process_alive(p) for p in pids)
    assert b"interrupted" in proc.stderr.read()


def test_second_ctrl_c_stops_at_once_even_ranks_ignoring_sigterm(tmp_path):
    proc, pids = _start_stubborn(tmp_path, 2, "term")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)   # SIGTERM now (ignored by the ranks)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)   # SIGKILL now
    _wait(proc, 30)
    assert time.monotonic() - start < 4
    assert proc.returncode == 130
    assert not any(process_alive(p) for p in pids)


@pytest.mark.parametrize("flag", [["--gloo"], ["--min-np", "1"],
                                  ["--jsrun"],
                                  ["--output-filename", "x"]])
def test_unsupported_upstream_flag_is_one_line(flag):
    out = subprocess.run(RUNNER + ["-np", "1"] + flag + ["true"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert flag[0] in lines[0] and "not supported by this build" in lines[0]


def test_unknown_flag_is_one_line():
    out = subprocess.run(RUNNER + ["--no-such-flag", "-np", "1", "true"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "horovodrun: unrecognized arguments: --no-such-flag "
        "(see horovodrun --help)"], out.stderr


@pytest.mark.parametrize("module", ["horovod.mxnet",
                                    "horovod.spark", "horovod.ray",
                                    "horovod.torch.elastic"])
def test_missing_framework_module_says_so(module):
    code = ("try:\n import %s\nexcept ImportError as e:\n"
            " print(type(e).__name__); print(e)\n" % module)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "ModuleNotFoundError", out
    top = module if module.count(".") == 2 else \
        ".".join(module.split(".")[:2])
    assert lines[1].startswith(top + " is not available:"), lines
    assert "not part of this build yet" in lines[1]


def test_tensorflow_adapter_without_tensorflow_names_the_package():
    code = ("import sys; sys.modules['tensorflow'] = None\n"
            "try:\n import horovod.tensorflow\nexcept ImportError as e:\n"
            " print(type(e).__name__); print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "ImportError", out
    assert "pip install tensorflow-cpu==2.21.0" in lines[1], lines


def test_hostfile_and_stall_flags(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# local only\nlocalhost slots=2\n")
    code = ("import os; print(os.environ['HOROVOD_SIZE'], "
            "os.environ['HOROVOD_STALL_SHUTDOWN_TIME_SECONDS'])")
    out = subprocess.run(RUNNER + ["-np", "2", "-hostfile", str(hostfile),
                                   "--stall-check-shutdown-time-seconds", "7",
                                   sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("2 7.0") == 2, out.stdout
