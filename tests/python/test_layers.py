"""scripts/check_layers.py: the source tree keeps to CMake's one-way graph,
and the check does catch an include that runs up it."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "check_layers", os.path.join(ROOT, "scripts", "check_layers.py"))
check_layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_layers)


def test_the_tree_keeps_to_its_layers():
    assert check_layers.violations() == []


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def test_an_include_up_the_layers_is_caught(tmp_path):
    write(str(tmp_path / "CMakeLists.txt"), """
        hvd_library(hvd_low SOURCES src/low/a.cc)  # the bottom
        hvd_library(hvd_mid SOURCES src/mid/b.cc DEPS hvd_low)
        add_library(top SHARED src/top/c.cc)
        target_link_libraries(top PRIVATE hvd_mid)
    """)
    write(str(tmp_path / "src/low/a.cc"), '#include "mid/b.h"\n')
    write(str(tmp_path / "src/mid/b.cc"),
          '#include "low/a.h"\n#include <horovod/engine.h>\n')
    write(str(tmp_path / "src/top/c.cc"),
          '#include "low/a.h"\n#include "mid/b.h"\n#include <vector>\n')
    found = check_layers.violations(str(tmp_path))
    assert len(found) == 2, found
    assert found[0].startswith("src/low/a.cc:1: includes mid/b.h"), found
    assert "<horovod/engine.h>" in found[1] and "src/mid/b.cc:2" in found[1]
