#!/usr/bin/env python3
"""Fails on an #include that runs up the layers.

The layers are CMakeLists.txt's own: one library per src/ folder, and the
libraries each links (DEPS of hvd_library, target_link_libraries). A file
in src/<folder>/ may include headers of its own folder and of the folders
its library reaches through those links, nothing else. Public headers
(include/horovod/) are open to every layer except the two that describe
the running engine, which only the layers above it may use.

  python3 scripts/check_layers.py        # exit 1 and one line per violation
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Public headers that belong to a layer: who may include them.
PUBLIC_USERS = {
    "engine.h": {"runtime", "python"},
    "framework_api.h": {"runtime", "python", "kernels", "jax", "tensorflow"},
}


def cmake_graph(text):
    """({target: set of src folders}, {target: set of linked targets})."""
    text = re.sub(r"#[^\n]*", "", text)
    folders, deps = {}, {}
    for call, args in re.findall(
            r"\b(hvd_library|add_library|nanobind_add_module|"
            r"target_link_libraries)\s*\(([^)]*)\)", text):
        words = args.split()
        if not words:
            continue
        target = words[0]
        folders.setdefault(target, set())
        deps.setdefault(target, set())
        for w in words[1:]:
            m = re.match(r"src/([a-z_]+)/", w)
            if m:
                folders[target].add(m.group(1))
            elif w.startswith("hvd_"):
                deps[target].add(w)
    return folders, deps


def allowed_folders(folders, deps):
    """{folder: folders its files may include}."""
    out = {}
    for target, own in folders.items():
        reach, todo = set(), [target]
        while todo:
            t = todo.pop()
            if t in reach:
                continue
            reach.add(t)
            todo.extend(deps.get(t, ()))
        ok = set()
        for t in reach:
            ok |= folders.get(t, set())
        for f in own:
            out.setdefault(f, set()).update(ok)
    return out


def violations(root=ROOT):
    with open(os.path.join(root, "CMakeLists.txt")) as f:
        folders, deps = cmake_graph(f.read())
    allowed = allowed_folders(folders, deps)
    src = os.path.join(root, "src")
    found = []
    for folder in sorted(os.listdir(src)):
        if folder not in allowed:
            found.append("src/%s: no CMake library builds this folder" % folder)
            continue
        for name in sorted(os.listdir(os.path.join(src, folder))):
            path = os.path.join(src, folder, name)
            with open(path) as f:
                for no, line in enumerate(f, 1):
                    m = re.match(r'\s*#\s*include\s*[<"]([^>"]+)[>"]', line)
                    if not m:
                        continue
                    inc = m.group(1)
                    where = "src/%s/%s:%d" % (folder, name, no)
                    if inc.startswith("horovod/"):
                        users = PUBLIC_USERS.get(inc[len("horovod/"):])
                        if users is not None and folder not in users:
                            found.append("%s: includes <%s>, which only %s "
                                         "may use" % (where, inc,
                                                      sorted(users)))
                        continue
                    top = inc.split("/")[0]
                    if "/" in inc and os.path.isdir(os.path.join(src, top)) \
                            and top not in allowed[folder]:
                        found.append("%s: includes %s, but %s may include "
                                     "only %s" % (where, inc, folder,
                                                  sorted(allowed[folder])))
    return found


if __name__ == "__main__":
    bad = violations()
    for line in bad:
        print(line)
    sys.exit(1 if bad else 0)
