"""scripts/check_sizes.py: no source file of the project runs past the
limit, and the check does catch one that does."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "check_sizes", os.path.join(ROOT, "scripts", "check_sizes.py"))
check_sizes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_sizes)


def test_every_source_file_keeps_to_the_limit():
    assert check_sizes.oversized() == []


def write_lines(path, n):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("x = 1\n" * n)


def test_a_file_past_the_limit_is_caught(tmp_path):
    write_lines(str(tmp_path / "src" / "mod" / "long.cc"), 601)
    write_lines(str(tmp_path / "src" / "mod" / "just.h"), 600)
    write_lines(str(tmp_path / "tests" / "python" / "long_test.py"), 700)
    write_lines(str(tmp_path / "docs" / "long.py"), 900)  # not a source folder
    write_lines(str(tmp_path / "python" / "data.json"), 900)  # not a source
    write_lines(str(tmp_path / "python" / "__pycache__" / "x.py"), 900)
    found = check_sizes.oversized(str(tmp_path))
    assert found == [
        "src/mod/long.cc: 601 lines (at most 600)",
        "tests/python/long_test.py: 700 lines (at most 600)",
    ], found
