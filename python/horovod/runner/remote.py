"""The launcher's agent on a host it reaches over ssh: starts one rank and
ties its life to the ssh session.

horovodrun runs ``python -m horovod.runner.remote`` over ssh and writes one
JSON line to its standard input: the working folder, the environment (the
job's secret among it, so it never appears on a command line) and the
command. Further lines carry signals for the rank (``INT``, ``TERM``,
``KILL``). When standard input ends, because the launcher stopped or died
or the connection broke, the rank's process group gets SIGTERM and, after
a grace period, SIGKILL. The rank's output goes straight to the session;
the agent exits with the rank's exit code (128 + N after signal N).
"""

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading

# A header is a few KB of environment; anything far larger is not ours.
MAX_HEADER_BYTES = 1 << 20
GRACE_S = 5.0
_SIGNALS = {"INT": signal.SIGINT, "TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


def read_header(stream, limit=MAX_HEADER_BYTES):
    """One JSON object on one line, at most `limit` bytes; ValueError
    otherwise."""
    line = stream.readline(limit + 1)
    if not line:
        raise ValueError("no header: standard input closed at once")
    if len(line) > limit or not line.endswith(b"\n"):
        raise ValueError("header longer than %d bytes" % limit)
    value = json.loads(line.decode("utf-8"))
    if not isinstance(value, dict):
        raise ValueError("header is not a JSON object")
    return value


def _validated(header):
    command, env, cwd = header.get("command"), header.get("env"), header.get("cwd")
    if (not isinstance(command, list) or not command or
            not all(isinstance(a, str) for a in command)):
        raise ValueError("header's command must be a non-empty list of strings")
    if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ValueError("header's env must map strings to strings")
    if not isinstance(cwd, str):
        raise ValueError("header's cwd must be a string")
    return command, env, cwd


def _child_setup():
    os.setsid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def _signal_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _follow_stdin(stdin, proc):
    """Forwards signal lines; at end of input stops the rank."""
    while True:
        line = stdin.readline(64)
        if not line:
            break
        sig = _SIGNALS.get(line.strip().decode("ascii", "replace"))
        if sig is not None:
            _signal_group(proc, sig)
    if proc.poll() is None:
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(proc, signal.SIGKILL)


def main():
    stdin = sys.stdin.buffer
    try:
        command, env, cwd = _validated(read_header(stdin))
    except ValueError as e:
        sys.stderr.write("horovodrun (remote agent): %s\n" % e)
        return 2
    try:
        os.chdir(cwd)
    except OSError as e:
        sys.stderr.write("horovodrun (remote agent): cannot enter %s on this "
                         "host: %s\n" % (cwd, e.strerror))
        return 2
    try:
        proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                preexec_fn=_child_setup)
    except OSError as e:
        sys.stderr.write("horovodrun (remote agent): cannot start %s: %s\n"
                         % (command[0], e.strerror))
        return 127
    threading.Thread(target=_follow_stdin, args=(stdin, proc),
                     daemon=True).start()
    code = proc.wait()
    _signal_group(proc, signal.SIGKILL)  # what the rank left behind
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: the thread reading standard input is still blocked in a
    # read, and an interpreter shutting down around it aborts.
    os._exit(code)
