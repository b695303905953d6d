"""The source tree as the convention checks read it: the layer table, the include graph of the
src/ modules and the targets the CMake files declare.

check-layers.py judges the include graph against cmake/layers.txt; check-readmes.py holds each
module README's "Depends on" line and test list against the same graph and targets. Both read
them here, so the two checks cannot disagree about what a module includes.
"""

import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
SOURCE_EXTENSIONS = (".h", ".cc", ".inc")
CMAKE_FILE_RE = re.compile(r"^(CMakeLists\.txt|.*\.cmake)$")
# Folders a walk of the repository never enters: build trees, installed packages, VCS data.
SKIPPED_DIRS = re.compile(r"^(build.*|\.git|\.cache|\.data|node_modules|__pycache__)$")


def load_layers(root):
    """cmake/layers.txt as ({module: layer}, {frozenset((a, b)) of `never a b`})."""
    path = os.path.join(root, "cmake", "layers.txt")
    layers, never = {}, set()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            if line[0] == "never" and len(line) == 3:
                never.add(frozenset(line[1:]))
            elif len(line) == 2 and line[0].isdigit():
                layers[line[1]] = int(line[0])
            else:
                sys.exit(f"{path}:{lineno}: expected `<layer> <module>` or `never <a> <b>`")
    return layers, never


def present_modules(root):
    """The folders under src/, sorted."""
    src = os.path.join(root, "src")
    return sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))


def is_test_source(name):
    return name.endswith("_test.cc") or (name.startswith("fuzz_") and name.endswith(".cc"))


def library_includes(root, module):
    """Every `#include "a/b..."` of the library code (not *_test.cc, not fuzz_*.cc) of
    src/<module>/, as (file relative to root, line, included path, its first folder)."""
    for dirpath, dirnames, files in os.walk(os.path.join(root, "src", module)):
        dirnames.sort()
        for name in sorted(files):
            if not name.endswith(SOURCE_EXTENSIONS) or is_test_source(name):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for m in INCLUDE_RE.finditer(text):
                if "/" not in m.group(1):
                    continue
                line = text.count("\n", 0, m.start()) + 1
                yield (os.path.relpath(path, root), line, m.group(1),
                       m.group(1).split("/", 1)[0])


def include_graph(root, modules):
    """{module: the other modules of `modules` its library code includes directly}."""
    known = set(modules)
    return {m: {first for _, _, _, first in library_includes(root, m)
                if first in known and first != m}
            for m in modules}


def strip_cmake_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def cmake_calls(text, command):
    """Argument strings of every `command(...)` call (parentheses balanced)."""
    for m in re.finditer(r"\b" + command + r"\s*\(", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        yield text[m.end():i - 1]


def cmake_files(root):
    """CMakeLists.txt and *.cmake files under src/ and test/, relative to root, sorted."""
    found = []
    for top in ("src", "test"):
        for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not SKIPPED_DIRS.match(d))
            found += [os.path.relpath(os.path.join(dirpath, n), root)
                      for n in files if CMAKE_FILE_RE.match(n)]
    return sorted(found)


def test_targets(root):
    """{klutch_test target name: the CMake file (relative to root) that declares it}."""
    targets = {}
    for rel in cmake_files(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = strip_cmake_comments(f.read())
        for args in cmake_calls(text, "klutch_test"):
            words = args.split()
            if words and re.fullmatch(r"[A-Za-z0-9_-]+", words[0]):
                targets[words[0]] = rel
    return targets
