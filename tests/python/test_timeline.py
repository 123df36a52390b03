"""Timeline: a Chrome trace that is valid JSON whenever it is read, with the
negotiation, operation and activity spans of every tensor."""

import json
import os
import subprocess
import sys
import time
from collections import defaultdict

import pytest

from conftest import assert_ok, horovodrun, worker


def check_spans(events):
    """B/E pairs nest per process; returns {pid: [(name, depth), ...]} of
    the spans opened, and {pid: tensor name}."""
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    stacks, opened = defaultdict(list), defaultdict(list)
    last_ts = defaultdict(int)
    for e in events:
        if e["ph"] not in "BEX":
            continue
        pid = e["pid"]
        assert pid in names, "event for an unnamed process: %r" % e
        assert e["ts"] >= last_ts[pid], "time goes back in %s" % names[pid]
        last_ts[pid] = e["ts"]
        if e["ph"] == "B":
            opened[pid].append((e["name"], len(stacks[pid])))
            stacks[pid].append(e["name"])
        elif e["ph"] == "E":
            assert stacks[pid], "E without B in %s" % names[pid]
            stacks[pid].pop()
    for pid, stack in stacks.items():
        assert not stack, "%s left open: %s" % (names[pid], stack)
    return opened, names


@pytest.mark.parametrize("transport", ["SHM", "TCP"])
def test_timeline_is_valid_json_while_the_job_runs(tmp_path, transport):
    path = str(tmp_path / "timeline.json")
    cmd = [sys.executable, "-m", "horovod.runner", "-np", "2",
           "--timeline-filename", path, "--timeline-mark-cycles",
           sys.executable, worker("timeline.py"), "static", "200000"]
    env = dict(os.environ, HOROVOD_SHM_DISABLE="1" if transport == "TCP" else "0")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env,
                            stderr=subprocess.STDOUT, text=True)
    parsed, sizes = 0, []
    try:
        deadline = time.time() + 120
        while proc.poll() is None and time.time() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read()
                json.loads(text)  # must never fail
                parsed += 1
                sizes.append(len(text))
            time.sleep(0.01)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert parsed >= 10 and sizes[-1] > sizes[0], (parsed, sizes[:3])

    with open(path) as f:
        events = json.load(f)
    opened, names = check_spans(events)
    by_name = {v: k for k, v in names.items()}
    grad = by_name["allreduce.static.grad.0"]
    spans = [n for n, _ in opened[grad]]
    assert "NEGOTIATE_ALLREDUCE" in spans and "ALLREDUCE" in spans
    # Activities nest inside the operation (depth 1).
    acts = {n for n, depth in opened[grad] if depth == 1}
    assert {"QUEUE", transport + "_ALLREDUCE"} <= acts, acts
    # Fused tensors pass through the fusion buffer over TCP; shared memory
    # reduces them where they lie.
    copies = {"MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER"}
    if transport == "TCP":
        assert copies <= acts, acts
    else:
        assert not copies & acts, acts
    # One tick per rank that reported the tensor ready.
    ticks = {e["name"] for e in events
             if e["ph"] == "X" and e["pid"] == grad}
    assert ticks == {"0", "1"}, ticks
    gather = [n for n, _ in opened[by_name["allgather.static.gather"]]]
    assert "NEGOTIATE_ALLGATHER" in gather and transport + "_ALLGATHER" in gather
    assert any(e["name"] == "CYCLE_START" for e in events)


def test_dynamic_timeline_records_only_between_start_and_stop(tmp_path):
    path = str(tmp_path / "dynamic.json")
    res = horovodrun(2, "timeline.py", "dynamic", path,
                     env={"HOROVOD_TIMELINE": "DYNAMIC"})
    assert_ok(res)
    assert res.stdout.count("timeline OK") == 2
    with open(path) as f:
        events = json.load(f)
    _, names = check_spans(events)
    tensors = set(names.values()) - {"horovod"}
    # Upstream's names: <op>.<given name>.
    assert tensors and all(t.startswith(("allreduce.during.",
                                         "allgather.during."))
                           for t in tensors), tensors
    assert any(e["name"] == "CYCLE_START" for e in events)
