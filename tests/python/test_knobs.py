"""The knob table (src/common/knobs.cc, exported as horovod._core.knob_table)
against what must agree with it: docs/knobs.md's rows and defaults,
horovodrun's flags, and every HOROVOD_* name the sources use."""

import os
import re
import subprocess
import sys

import pytest

from horovod import _core
from horovod.runner import flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TABLE = {name: dict(type=kind, default=default, range=rng,
                    flags=flags.split(), summary=summary, job=job)
         for name, kind, default, rng, flags, summary, job
         in _core.knob_table()}


def doc_rows():
    """{name: default cell} for each `HOROVOD_*` row of docs/knobs.md (job
    description rows, which list several names and no default: None)."""
    rows = {}
    with open(os.path.join(ROOT, "docs", "knobs.md")) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            names = re.findall(r"`(HOROVOD_[A-Z_]+)`", cells[0])
            for name in names:
                rows[name] = cells[1] if len(names) == 1 and \
                    len(cells) == 3 else None
    return rows


def test_every_knob_is_documented_with_its_default():
    rows = doc_rows()
    for name, k in TABLE.items():
        assert name in rows, "%s is missing from docs/knobs.md" % name
        if k["job"]:
            continue
        shown = re.sub(r"\s*\(.*\)$", "", rows[name]).strip("`")
        assert shown == k["default"], (name, rows[name], k["default"])
    extra = set(rows) - set(TABLE)
    assert not extra, "documented but not in the table: %s" % sorted(extra)


def flag_env(action, option):
    """The HOROVOD_* variables horovodrun sets when given `option`."""
    value = ["3"] * (action.nargs if isinstance(action.nargs, int) else 1)
    return flags.knob_env(flags.parse_args([option] + value + ["true"]))


def test_horovodrun_flags_set_their_variables_and_only_those():
    actions = {o: a for a in flags.make_parser()._actions
               for o in a.option_strings
               if o.startswith("--") and o != "--help"}
    for name, k in TABLE.items():
        for flag in k["flags"]:
            assert flag in actions, "horovodrun has no %s (%s)" % (flag, name)
            assert name in flag_env(actions[flag], flag), (flag, name)
    for option, action in actions.items():
        for var in flag_env(action, option):
            assert option in TABLE[var]["flags"], (
                "%s sets %s, but the table does not say so" % (option, var))


def test_every_horovod_name_in_the_sources_is_in_the_table():
    used = {}
    for top, pattern in (("src", r"\.(cc|h)$"), ("include", r"\.h$"),
                         (os.path.join("python", "horovod"), r"\.py$")):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if not re.search(pattern, f):
                    continue
                path = os.path.join(folder, f)
                with open(path, errors="replace") as fh:
                    for name in re.findall(r"HOROVOD_[A-Z0-9_]*[A-Z0-9]",
                                           fh.read()):
                        used.setdefault(name, path)
    guards = {n for n in used if n.endswith("_H")}
    unknown = {n: p for n, p in used.items()
               if n not in TABLE and n not in guards}
    assert not unknown, unknown


@pytest.mark.parametrize("value,kept", [("100", True), ("8192", False)])
def test_out_of_range_values_warn_naming_value_and_range(value, kept):
    code = ("import horovod.torch as hvd; hvd.init(); hvd.shutdown()")
    env = dict(os.environ, HOROVOD_RING_CHUNK_BYTES=value)
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    warned = ("ignoring HOROVOD_RING_CHUNK_BYTES=100: outside its range "
              ">= 4096; keeping 1048576")
    assert (warned in out.stderr) == kept, out.stderr
