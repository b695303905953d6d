#!/usr/bin/env python3
"""Checks the module READMEs (CONVENTIONS.md, "Comments and docs").

  check-readmes.py [--root DIR]   check the tree (default: the repository of this script)
  check-readmes.py --self-test    run the check on broken READMEs and require it to fail

Every src/<module>/ has a README.md of at most 15 lines (purpose, main types, dependencies,
tests), none longer than 100 columns, so a README cannot hide length in long lines.
"""

import os
import sys
import tempfile

import checklib

MAX_LINES = 15
MAX_COLUMNS = 100


def check(root):
    errors = []
    src = os.path.join(root, "src")
    for module in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, module)):
            continue
        rel = f"src/{module}/README.md"
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            errors.append(f"{rel}: missing (purpose, main types, dependencies, tests)")
            continue
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        if len(lines) > MAX_LINES:
            errors.append(f"{rel}: {len(lines)} lines, at most {MAX_LINES}")
        for n, line in enumerate(lines, 1):
            if len(line) > MAX_COLUMNS:
                errors.append(f"{rel}:{n}: {len(line)} columns, at most {MAX_COLUMNS}")
    return errors


def self_test():
    cases = {
        "clean": ({"core": "# core\n\nStatus.\n" + "x\n" * 12}, None),
        "too long": ({"core": "# core\n" + "x\n" * 15}, "16 lines, at most 15"),
        "wide line": ({"core": "# core\n" + "x" * 101 + "\n"}, "101 columns"),
        "missing": ({"core": "# core\n", "http": None}, "src/http/README.md: missing"),
    }
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, (modules, expected)) in enumerate(cases.items()):
            root = os.path.join(tmp, str(i))
            for module, text in modules.items():
                os.makedirs(os.path.join(root, "src", module))
                if text is not None:
                    with open(os.path.join(root, "src", module, "README.md"), "w") as f:
                        f.write(text)
            errors = check(root)
            ok = not errors if expected is None else any(expected in e for e in errors)
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {errors or 'clean'}")
            failures += not ok
    return checklib.verdict(failures)


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, "check-readmes", check, self_test))
