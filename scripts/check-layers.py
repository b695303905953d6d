#!/usr/bin/env python3
"""Checks that src/ modules depend only on lower layers (cmake/layers.txt).

  check-layers.py [--root DIR]   check the tree (default: the repository holding this script)
  check-layers.py --self-test    run the check on small broken trees and require it to fail

Rules (ARCHITECTURE.md §5):
  - every folder under src/ is listed in cmake/layers.txt ("add it to the layer table");
  - a library source or header of src/<m>/ includes `"<x>/..."` only for x == m or x of a lower
    layer, and never test/ or cmd/; *_test.cc and fuzz_*.cc files may include anything;
  - the klutch_library() of src/<m>/CMakeLists.txt (DEPS and PRIVATE_DEPS) and any
    target_link_libraries(klutch_<m> ...) name only klutch_<x> of a lower layer;
  - `never a b` pairs never include or link each other;
  - docs/architecture.md's module table gives every present module the same layer.
Exit status 1 with one line per violation, 0 when clean.
"""

import os
import re
import sys
import tempfile

import checklib
from srctree import cmake_calls, library_includes, load_layers, present_modules, \
    strip_cmake_comments

DOCS_ROW_RE = re.compile(r"^\|\s*(\d+)\s*\|\s*`src/([a-z0-9_]+)`", re.MULTILINE)
NON_MODULE_ROOTS = ("test", "cmd")  # only tests may include these


def dependency_error(module, target, layers, never):
    """Why `module` may not depend on `target`, or None."""
    if target == module:
        return None
    if frozenset((module, target)) in never:
        return f"{module} and {target} never depend on each other"
    if target not in layers:
        return None  # reported as an unknown folder, or not a module at all
    if layers[target] >= layers[module]:
        return (f"{module} (layer {layers[module]}) may use only lower layers, "
                f"not {target} (layer {layers[target]})")
    return None


def check_cmake(root, module, layers, never, errors):
    path = os.path.join(root, "src", module, "CMakeLists.txt")
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        text = strip_cmake_comments(f.read())
    rel = os.path.relpath(path, root)
    linked = []
    for args in cmake_calls(text, "klutch_library"):
        words = args.split()
        if words and words[0] != module:
            errors.append(f"{rel}: klutch_library({words[0]}) in src/{module}/: "
                          f"the library of a folder is klutch_{module}")
        linked += words[1:]
    for args in cmake_calls(text, "target_link_libraries"):
        words = args.split()
        if words and words[0] == "klutch_" + module:
            linked += words[1:]
    for word in linked:
        m = re.fullmatch(r"klutch_([a-z0-9_]+)", word)
        if not m:
            continue
        target = m.group(1)
        if target not in layers:
            errors.append(f"{rel}: klutch_{module} links {word}, which is not a src/ module "
                          "of cmake/layers.txt (library code may not link test libraries)")
            continue
        why = dependency_error(module, target, layers, never)
        if why:
            errors.append(f"{rel}: klutch_{module} links {word}: {why}")


def check_docs(root, present, layers, errors):
    path = os.path.join(root, "docs", "architecture.md")
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        rows = {m.group(2): int(m.group(1)) for m in DOCS_ROW_RE.finditer(f.read())}
    for module in sorted(present):
        if module not in layers:
            continue
        if module not in rows:
            errors.append(f"docs/architecture.md: the module table has no row for src/{module} "
                          f"(layer {layers[module]})")
        elif rows[module] != layers[module]:
            errors.append(f"docs/architecture.md: src/{module} is in layer {rows[module]}, "
                          f"cmake/layers.txt says {layers[module]}")


def check(root):
    layers, never = load_layers(root)
    errors = []
    present = present_modules(root)
    for module in present:
        if module not in layers:
            errors.append(f"src/{module}/: unknown module; add it to the layer table "
                          "(cmake/layers.txt, docs/architecture.md)")
            continue
        for rel, line, included, first in library_includes(root, module):
            if first in NON_MODULE_ROOTS:
                errors.append(f"{rel}:{line}: includes \"{included}\": only *_test.cc "
                              f"and fuzz_*.cc may include {first}/")
                continue
            if first not in present and first not in layers:
                continue  # a third-party header such as "fmt/format.h"
            why = dependency_error(module, first, layers, never)
            if why:
                errors.append(f"{rel}:{line}: includes \"{included}\": {why}")
        check_cmake(root, module, layers, never, errors)
    check_docs(root, present, layers, errors)
    return errors


# --- self-test ---------------------------------------------------------------------------------

LAYERS = "0 core\n1 machinery\n4 apiserver\n4 client\n6 bind\n6 konnector\nnever bind konnector\n"
DOCS = ("| layer | module | what |\n| --- | --- | --- |\n| 0 | `src/core` | x |\n"
        "| 1 | `src/machinery` | x |\n| 4 | `src/apiserver` | x |\n| 4 | `src/client` | x |\n")
CLEAN = {
    "cmake/layers.txt": LAYERS,
    "docs/architecture.md": DOCS,
    "src/core/status.h": "#pragma once\n#include <string>\n",
    "src/core/CMakeLists.txt": "klutch_library(core SOURCES status.cc DEPS fmt::fmt)\n",
    "src/machinery/json.h": '#include "core/status.h"\n#include "fmt/format.h"\n',
    "src/machinery/CMakeLists.txt":
        "klutch_library(machinery\n  SOURCES json.cc\n  DEPS klutch_core)\n"
        "klutch_test(machinery_test SOURCES json_test.cc DEPS klutch_client)\n",
    "src/client/rest_client.cc": '#include "client/rest_client.h"\n#include "machinery/json.h"\n',
    "src/client/rest_client_test.cc": '#include "apiserver/server.h"\n#include "test/x.h"\n',
    "src/client/fuzz_watch.cc": '#include "apiserver/server.h"\n',
    "src/client/CMakeLists.txt":
        "klutch_library(client SOURCES a.cc\n  DEPS klutch_machinery # klutch_apiserver\n"
        "  PRIVATE_DEPS klutch_core)\n",
    "src/apiserver/server.h": '#include "machinery/json.h"\n',
}
# name -> (files to add or replace, a substring the failure must print)
BROKEN = {
    "same layer include": ({"src/client/informer.h": '#include "apiserver/server.h"\n'},
                           '"apiserver/server.h": client (layer 4) may use only lower'),
    "upward include": ({"src/machinery/object.cc": '#include "client/rest_client.h"\n'},
                       "machinery (layer 1) may use only lower layers, not client (layer 4)"),
    "library includes test support": ({"src/client/helper.cc": '#include "test/support/x.h"\n'},
                                      "only *_test.cc and fuzz_*.cc may include test/"),
    "unknown folder": ({"src/util/util.h": "#pragma once\n"},
                       "src/util/: unknown module; add it to the layer table"),
    "upward DEPS": ({"src/machinery/CMakeLists.txt":
                     "klutch_library(machinery SOURCES a.cc\n  DEPS klutch_core klutch_client)\n"},
                    "klutch_machinery links klutch_client"),
    "same layer PRIVATE_DEPS": ({"src/client/CMakeLists.txt":
                                 "klutch_library(client SOURCES a.cc PRIVATE_DEPS klutch_apiserver)\n"},
                                "klutch_client links klutch_apiserver"),
    "upward target_link_libraries": ({"src/core/CMakeLists.txt":
                                      "klutch_library(core SOURCES a.cc)\n"
                                      "target_link_libraries(klutch_core PUBLIC klutch_machinery)\n"},
                                     "klutch_core links klutch_machinery"),
    "library links a test library": ({"src/client/CMakeLists.txt":
                                      "klutch_library(client SOURCES a.cc DEPS klutch_test_support)\n"},
                                     "not a src/ module"),
    "backend includes konnector": ({"src/bind/a.cc": '#include "konnector/b.h"\n',
                                    "src/konnector/b.h": "#pragma once\n",
                                    "docs/architecture.md":
                                        DOCS + "| 6 | `src/bind` | x |\n| 6 | `src/konnector` | x |\n"},
                                   "bind and konnector never depend on each other"),
    "docs disagree": ({"docs/architecture.md": DOCS.replace("| 4 | `src/client`", "| 3 | `src/client`")},
                      "src/client is in layer 3, cmake/layers.txt says 4"),
    "docs lack a module": ({"docs/architecture.md": DOCS.replace("| 4 | `src/client` | x |\n", "")},
                           "no row for src/client"),
}


def write_tree(root, files):
    for rel, text in files.items():
        checklib.write(root, rel, text)


def self_test():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        write_tree(os.path.join(tmp, "clean"), CLEAN)
        errors = check(os.path.join(tmp, "clean"))
        if errors:
            failures += 1
            print("FAIL clean tree reported violations:\n  " + "\n  ".join(errors))
        for i, (name, (files, expected)) in enumerate(BROKEN.items()):
            root = os.path.join(tmp, f"broken{i}")
            write_tree(root, {**CLEAN, **files})
            errors = check(root)
            if any(expected in e for e in errors):
                print(f"ok   {name}: {next(e for e in errors if expected in e)}")
            else:
                failures += 1
                print(f"FAIL {name}: expected a violation containing {expected!r}, got {errors}")
    return checklib.verdict(failures)


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, "check-layers", check, self_test, "violation(s) of cmake/layers.txt"))
