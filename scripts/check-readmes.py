#!/usr/bin/env python3
"""Checks the module and test-folder READMEs (CONVENTIONS.md, "Comments and docs").

  check-readmes.py [--root DIR]   check the tree (default: the repository of this script)
  check-readmes.py --self-test    run the check on broken READMEs and require it to fail

Rules:
  - every src/<module>/ has a README.md of at most 15 lines (purpose, main types, dependencies,
    tests), none longer than 100 columns, so a README cannot hide length in long lines;
  - its "Depends on" clause (from "Depends on" to the first `.` or `;` ending a sentence,
    parenthesised remarks left out) names exactly the src/ modules its library code includes
    (the include graph check-layers.py judges; third-party names such as OpenSSL are free);
  - every klutch_test() target is named in its folder's README: src/<module>/README.md for a
    target declared under src/<module>/, test/<dir>/README.md for one under test/<dir>/. The
    name counts as a word (not as part of `name.cc`), or through a backticked glob such as
    `machinery_*_test` or `test/integration/{client,informer}_test`;
  - a backticked `<name>_test` (or `<path>/<name>_test`) in those READMEs is a klutch_test()
    target, so a renamed or removed test cannot stay cited.
"""

import fnmatch
import os
import re
import sys

import checklib
from srctree import include_graph, load_layers, present_modules, test_targets

MAX_LINES = 15
MAX_COLUMNS = 100
DEPENDS_LINE_RE = re.compile(r"\bDepends\s+on\b:?")  # preferred over a "... depends on ..."
DEPENDS_RE = re.compile(r"\bdepends\s+on\b:?", re.IGNORECASE)
CLAUSE_END_RE = re.compile(r"[.;](\s|$)")
CODE_SPAN_RE = re.compile(r"`([^`]+)`")
TEST_NAME_RE = re.compile(r"(?:[\w./-]*/)?([a-z0-9_]+_test)")


def depends_on(text, modules):
    """The modules a README's "Depends on" clause names, or None without such a clause."""
    m = DEPENDS_LINE_RE.search(text) or DEPENDS_RE.search(text)
    if not m:
        return None
    clause = re.sub(r"\([^)]*\)", "", text[m.end():])
    end = CLAUSE_END_RE.search(clause)
    clause = clause[:end.start()] if end else clause
    return {w for w in re.findall(r"[A-Za-z0-9_]+", clause) if w in modules}


def check_depends_on(rel, text, module, graph, modules, errors):
    named = depends_on(text, modules)
    included = graph.get(module, set())
    if named is None:
        errors.append(f"{rel}: no \"Depends on\" line (say which src/ modules it includes: "
                      f"{', '.join(sorted(included)) or 'none'})")
        return
    if named == included:
        return
    parts = []
    if included - named:
        parts.append("add " + ", ".join(sorted(included - named)))
    if named - included:
        parts.append("drop " + ", ".join(sorted(named - included)) + " (not included)")
    errors.append(f"{rel}: \"Depends on\" names {', '.join(sorted(named)) or 'no module'}; "
                  f"the library code includes {', '.join(sorted(included)) or 'no module'}: "
                  + "; ".join(parts))


def names_target(text, target):
    if re.search(r"(?<![\w-])" + re.escape(target) + r"(?![\w-]|\.\w)", text):
        return True
    for span in CODE_SPAN_RE.findall(text):
        if "*" not in span and "{" not in span:
            continue
        for pattern in checklib.expand_braces(span.strip()):
            if fnmatch.fnmatchcase(target, pattern.rsplit("/", 1)[-1]):
                return True
    return False


def readme_of(cmake_file):
    """The README that must name the tests of `cmake_file`: src/<m>/ or test/<dir>/."""
    parts = cmake_file.split("/")
    return "/".join(parts[:2] + ["README.md"]) if len(parts) > 2 else None


def check_tests(root, targets, errors):
    by_readme = {}
    for target, cmake_file in sorted(targets.items()):
        by_readme.setdefault(readme_of(cmake_file), []).append((target, cmake_file))
    for readme, entries in sorted(by_readme.items(), key=lambda kv: kv[0] or ""):
        if readme is None or not os.path.exists(os.path.join(root, readme)):
            for target, cmake_file in entries:
                errors.append(f"{cmake_file}: test {target} has no folder README to name it "
                              f"({readme or 'declare it in src/<module>/ or test/<dir>/'})")
            continue
        with open(os.path.join(root, readme), encoding="utf-8") as f:
            text = f.read()
        for target, cmake_file in entries:
            if not names_target(text, target):
                errors.append(f"{readme}: does not name the test {target} ({cmake_file})")


def check_cited_tests(rel, text, targets, errors):
    for span in CODE_SPAN_RE.findall(text):
        for cited in checklib.expand_braces(span.strip()):
            m = TEST_NAME_RE.fullmatch(cited)
            if m and m.group(1) not in targets:
                errors.append(f"{rel}: names the test `{cited}`, which no klutch_test() "
                              "declares")


def test_readmes(root):
    """test/<dir>/README.md files, relative to root."""
    test = os.path.join(root, "test")
    if not os.path.isdir(test):
        return []
    return sorted(f"test/{d}/README.md" for d in os.listdir(test)
                  if os.path.exists(os.path.join(test, d, "README.md")))


def check(root):
    errors = []
    modules = present_modules(root)
    layers, _ = load_layers(root)
    graph = include_graph(root, sorted(set(modules) | set(layers)))
    targets = test_targets(root)
    for module in modules:
        rel = f"src/{module}/README.md"
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            errors.append(f"{rel}: missing (purpose, main types, dependencies, tests)")
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.splitlines()
        if len(lines) > MAX_LINES:
            errors.append(f"{rel}: {len(lines)} lines, at most {MAX_LINES}")
        for n, line in enumerate(lines, 1):
            if len(line) > MAX_COLUMNS:
                errors.append(f"{rel}:{n}: {len(line)} columns, at most {MAX_COLUMNS}")
        check_depends_on(rel, text, module, graph, set(modules) | set(layers), errors)
        check_cited_tests(rel, text, targets, errors)
    for rel in test_readmes(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            check_cited_tests(rel, f.read(), targets, errors)
    check_tests(root, targets, errors)
    return errors


# --- self-test ---------------------------------------------------------------------------------

CLEAN = {
    "cmake/layers.txt": "0 core\n2 http\n3 auth\n",
    "src/core/README.md": "# core\n\nStatus.\nDepends on: fmt. Tests: `core_test`.\n",
    "src/core/status.h": "#pragma once\n#include <string>\n",
    "src/core/CMakeLists.txt": "klutch_library(core SOURCES a.cc)\nklutch_test(core_test)\n",
    "src/http/README.md": "# http\n\nWhat the API depends on.\n"
                          "Depends on: core, OpenSSL (private); never more.\n"
                          "Tests: `http_*_test`.\n",
    "src/http/server.cc": '#include "core/status.h"\n#include "fmt/format.h"\n',
    "src/http/fuzz_request.cc": '#include "auth/jwt.h"\n',
    "src/http/CMakeLists.txt": "klutch_test(http_server_test)\nklutch_test(http_url_test)\n",
    "src/auth/README.md": "# auth\n\nJWT. Depends on core,\nhttp (OIDC fetches, e.g. JWKS).\n"
                          "Tests: auth_jwt_test; `test/integration/{auth,oidc}_test`.\n",
    "src/auth/jwt.cc": '#include "core/status.h"\n#include "http/client.h"\n',
    "src/auth/jwt_test.cc": '#include "test/support/x.h"\n',
    "src/auth/CMakeLists.txt": "# klutch_test(old_test)\nklutch_test(auth_jwt_test SOURCES x)\n",
    "test/integration/README.md": "# test/integration\n\n`auth_test`: tokens. `oidc_test`.\n",
    "test/integration/CMakeLists.txt": "klutch_test(auth_test\n  SOURCES auth_test.cc)\n"
                                       "klutch_test(oidc_test)\n",
}
# name -> (files to add or replace (None removes), a substring the failure must print)
BROKEN = {
    "too long": ({"src/core/README.md": "# core\nDepends on: fmt. `core_test`\n" + "x\n" * 14},
                 "16 lines, at most 15"),
    "wide line": ({"src/core/README.md": "# core\nDepends on: fmt. `core_test`\n" + "x" * 101},
                  "101 columns"),
    "missing": ({"src/http/README.md": None}, "src/http/README.md: missing"),
    "no Depends on": ({"src/core/README.md": "# core\n\nTests: `core_test`.\n"},
                      "src/core/README.md: no \"Depends on\" line"),
    "Depends on lacks an include": ({"src/auth/jwt.cc": '#include "core/status.h"\n'
                                                        '#include "http/client.h"\n',
                                     "src/auth/README.md": "# auth\nDepends on: core. "
                                                           "auth_jwt_test\n"},
                                    "the library code includes core, http: add http"),
    "Depends on names a module not included": (
        {"src/http/README.md": "# http\nDepends on: core, auth. `http_*_test`\n"},
        "drop auth (not included)"),
    "test not named": ({"src/core/CMakeLists.txt": "klutch_test(core_test)\n"
                                                   "klutch_test(core_file_test)\n"},
                       "src/core/README.md: does not name the test core_file_test"),
    "test named only as a file": ({"test/integration/README.md": "`oidc_test.cc`, `auth_test`\n"},
                                  "does not name the test oidc_test"),
    "test in a .cmake file": ({"src/auth/tests.cmake": "klutch_test(auth_rbac_test)\n"},
                              "does not name the test auth_rbac_test (src/auth/tests.cmake)"),
    "test folder without README": ({"test/e2e/CMakeLists.txt": "klutch_test(e2e_test)\n"},
                                   "test e2e_test has no folder README"),
    "README cites a removed test": ({"src/core/README.md": "# core\nDepends on: fmt. "
                                                           "`core_test`, `core_old_test`\n"},
                                    "names the test `core_old_test`, which no klutch_test()"),
    "README cites a removed test by path": (
        {"test/integration/README.md": "`auth_test`, `oidc_test`, `test/e2e/{gone,oidc}_test`\n"},
        "names the test `test/e2e/gone_test`"),
}


def self_test():
    return checklib.run_cases(check, CLEAN, BROKEN)


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, "check-readmes", check, self_test))
