"""What a user sees from horovodrun: progress bars as they are drawn (on a
terminal and off it), Ctrl-C that stops every rank, and one-line messages
for what this build does not provide. Every launch has a timeout."""

import os
import pty
import re
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


@pytest.mark.parametrize("flag", [["--jsrun"], ["--gloo-timeout-seconds", "5"],
                                  ["--num-nccl-streams", "2"],
                                  ["--thread-affinity", "1"]])
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


@pytest.mark.parametrize("module,top", [
    ("horovod.mxnet", "horovod.mxnet"),
    # A submodule names the package that is missing.
    ("horovod.mxnet.functions", "horovod.mxnet")])
def test_missing_framework_module_says_so(module, top):
    code = ("try:\n import %s\nexcept ImportError as e:\n"
            " print(type(e).__name__); print(e)\n" % module)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "ModuleNotFoundError", out
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


@pytest.mark.parametrize("hosts,hostfile,message", [
    ("localhost:x", None, "-H localhost:x: 'localhost:x' is not host or "
     "host:slots with slots a positive number"),
    ("localhost:0,b:1", None, "'localhost:0' is not host or host:slots"),
    (":2", None, "':2' is not host or host:slots"),
    (None, "localhost slots=two\n", "line 1: 'localhost slots=two' is not "
     "host [slots=N] or host:N with N a positive number"),
    (None, None, "cannot read -hostfile"),
])
def test_bad_hosts_are_one_line_naming_the_entry(tmp_path, hosts, hostfile,
                                                  message):
    if hosts is not None:
        where = ["-H", hosts]
    else:
        path = tmp_path / "hosts"
        if hostfile is not None:
            path.write_text(hostfile)
        where = ["-hostfile", str(path)]
    for elastic in ([], ["--min-np", "1"]):
        if elastic and hosts is None:
            continue
        out = subprocess.run(RUNNER + ["-np", "2"] + elastic + where +
                             ["true"], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 2, out
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], out.stderr


@pytest.mark.parametrize("flags,env,message", [
    (["--start-timeout", "0"], {},
     "--start-timeout must be a positive number of seconds, not 0"),
    (["--start-timeout", "nan"], {}, "not nan"),
    ([], {"HOROVOD_START_TIMEOUT": "-1"},
     "HOROVOD_START_TIMEOUT must be a positive number of seconds, not -1"),
    ([], {"HOROVOD_START_TIMEOUT": "soon"},
     "HOROVOD_START_TIMEOUT='soon' is not a number of seconds"),
    (["--min-np", "1", "--elastic-timeout", "-3"], {},
     "--elastic-timeout must be a positive number of seconds, not -3"),
    (["--min-np", "1"], {"HOROVOD_ELASTIC_TIMEOUT": "soon"},
     "HOROVOD_ELASTIC_TIMEOUT='soon' is not a number of seconds"),
])
def test_a_timeout_that_cannot_work_is_one_line_before_any_rank_starts(
        flags, env, message):
    out = subprocess.run(RUNNER + ["-np", "2"] + flags + ["true"],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, **env))
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], out.stderr


@pytest.mark.parametrize("command,code,why", [
    ("no-such-command-here", 127, "No such file or directory"),
    ("not-executable", 126, "Permission denied")])
def test_a_command_that_cannot_start_is_one_line_with_the_shells_code(
        tmp_path, command, code, why):
    if command == "not-executable":
        command = str(tmp_path / command)
        with open(command, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(command, 0o644)
    out = subprocess.run(RUNNER + ["-np", "2", command], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == code, out
    assert out.stderr.strip().splitlines() == [
        "horovodrun: cannot start %s: %s" % (command, why)], out.stderr


def _run(*args, env=None, timeout=120):
    return subprocess.run(RUNNER + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


_SAY = ("import os, sys; r = os.environ['HOROVOD_RANK']; print('out', r); "
        "print('err', r, file=sys.stderr)")


def test_output_filename_copies_each_ranks_streams_into_its_folder(tmp_path):
    out = _run("-np", 2, "--output-filename", tmp_path / "logs", sys.executable,
               "-c", _SAY)
    assert out.returncode == 0, out.stderr
    for r in (0, 1):
        folder = tmp_path / "logs" / ("rank.%d" % r)
        assert (folder / "stdout").read_text() == "out %d\n" % r
        assert (folder / "stderr").read_text() == "err %d\n" % r
        assert "[%d]<stdout>:out %d" % (r, r) in out.stdout  # still shown


def test_output_lines_can_carry_the_time(tmp_path):
    out = _run("-np", 1, "--prefix-output-with-timestamp", sys.executable, "-c",
               _SAY)
    assert out.returncode == 0, out.stderr
    assert re.match(r"^\w{3} \w{3} \d\d \d\d:\d\d:\d\d \d{4}\[0\]<stdout>:out 0$",
                    out.stdout.strip()), out.stdout


_SHOW_ENV = ("import os; print(' '.join('%s=%s' % (k, os.environ.get(k)) for k "
             "in ('HOROVOD_CACHE_CAPACITY', 'HOROVOD_FUSION_THRESHOLD', "
             "'HOROVOD_LOG_LEVEL', 'HOROVOD_STALL_CHECK_DISABLE', "
             "'HOROVOD_HIERARCHICAL_ALLREDUCE', 'HOROVOD_LOG_HIDE_TIME')))")


def test_config_file_sets_what_the_flags_set_and_flags_win(tmp_path):
    config = tmp_path / "horovod.yaml"
    config.write_text("params:\n  fusion_threshold_mb: 2\n  cache_capacity: 7\n"
                      "  hierarchical_allreduce: false\n"
                      "stall_check:\n  enabled: false\n"
                      "logging:\n  level: debug\n  with_timestamp: false\n")
    out = _run("-np", 1, "--config-file", config, "--cache-capacity", 9,
               sys.executable, "-c", _SHOW_ENV)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(":", 1)[1].split() == [
        "HOROVOD_CACHE_CAPACITY=9", "HOROVOD_FUSION_THRESHOLD=2097152",
        "HOROVOD_LOG_LEVEL=DEBUG", "HOROVOD_STALL_CHECK_DISABLE=1",
        "HOROVOD_HIERARCHICAL_ALLREDUCE=0", "HOROVOD_LOG_HIDE_TIME=1"]


@pytest.mark.parametrize("text,message", [
    ("params:\n  fusion_mb: 2\n", "params.fusion_mb is not a setting horovodrun "
                                   "knows"),
    ("params:\n  cache_capacity: lots\n",
     "params.cache_capacity must be a whole number, not 'lots'"),
    ("stall_check:\n  enabled: 1\n",
     "stall_check.enabled must be true or false, not 1"),
    ("library_options:\n  num_nccl_streams: 2\n",
     "library_options.num_nccl_streams is not supported by this build"),
    ("controller: nccl\n", "controller must be gloo or mpi, not 'nccl'"),
    ("params: [\n", "is not valid YAML")])
def test_config_file_errors_name_the_setting(tmp_path, text, message):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    out = _run("-np", 1, "--config-file", config, "true")
    assert out.returncode == 2
    assert message in out.stderr and out.stderr.startswith("horovodrun: "), \
        out.stderr


_WARN = "import horovod.torch as hvd; hvd.init(); hvd.shutdown()"


def test_log_level_and_log_timestamps():
    env = {"HOROVOD_RING_CHUNK_BYTES": "100"}  # out of range: a warning
    out = _run("-np", 1, sys.executable, "-c", _WARN, env=env)
    assert out.returncode == 0, out.stderr
    assert re.search(r"<stderr>:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}: "
                     r"horovod WARNING\] ignoring HOROVOD_RING_CHUNK_BYTES=100",
                     out.stderr), out.stderr
    out = _run("-np", 1, "--log-hide-timestamp", sys.executable, "-c", _WARN,
               env=env)
    assert "<stderr>:[horovod WARNING] ignoring" in out.stderr, out.stderr
    out = _run("-np", 1, "--log-level", "error", sys.executable, "-c", _WARN,
               env=env)
    assert "ignoring" not in out.stderr, out.stderr
    out = _run("-np", 1, "--log-level", "loud", "true")
    assert out.returncode == 2
    assert out.stderr.strip() == ("horovodrun: --log-level loud is not one of "
                                  "TRACE, DEBUG, INFO, WARNING, ERROR, FATAL")


def test_an_output_folder_that_cannot_be_made_or_a_bad_port_is_refused(
        tmp_path):
    (tmp_path / "file").write_text("")
    out = _run("-np", 2, "--output-filename", tmp_path / "file" / "logs",
               "true")
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "horovodrun: cannot make the --output-filename folder %s: Not a "
        "directory" % (tmp_path / "file" / "logs")), out.stderr
    out = _run("-np", 1, "-p", 99999, "true")
    assert out.returncode == 2
    assert out.stderr.strip() == "horovodrun: -p 99999 is not a port (1 to " \
        "65535)", out.stderr


def test_mpi_flag_launches_through_mpirun():
    # As root too (this test's user in CI), without OpenMPI's variables.
    out = _run("-np", 2, "--mpi", sys.executable, worker("placement.py"))
    assert out.returncode == 0, out.stderr[-3000:]
    # mpirun's --tag-output may run one rank's line into the next.
    tagged = out.stdout.split("PLACE ")
    assert len(tagged) == 3, out.stdout
    assert all(t.rstrip().endswith("<stdout>:") and "[1," in t
               for t in tagged[:-1]), out.stdout
    assert all('"sum": 1.0' in t for t in tagged[1:]), out.stdout
