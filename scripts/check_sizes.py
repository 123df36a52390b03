#!/usr/bin/env python3
"""Fails on a source file longer than LIMIT lines.

A file that long does several jobs; split it along its seams (the engine's
loop, negotiation, board and failure diagnosis are files of their own for
that reason). Counted: C, C++ and Python sources and shell scripts in the
project's own folders, tests included; not data, docs or build output.

  python3 scripts/check_sizes.py        # exit 1 and one line per file
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 600
FOLDERS = ("src", "include", "python", "tests", "benchmarks", "scripts",
           "examples")
SUFFIXES = (".c", ".cc", ".h", ".py", ".sh")


def oversized(root=ROOT, limit=LIMIT):
    """One line per source file under `root` longer than `limit` lines."""
    found = []
    for top in FOLDERS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    lines = sum(1 for _ in f)
                if lines > limit:
                    found.append("%s: %d lines (at most %d)" % (
                        os.path.relpath(path, root), lines, limit))
    return found


if __name__ == "__main__":
    bad = oversized()
    for line in bad:
        print(line)
    sys.exit(1 if bad else 0)
