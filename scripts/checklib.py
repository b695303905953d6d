"""The command line shared by the convention checks of scripts/check-*.py.

Each check is a function root -> list of findings plus a self-test that runs it on broken
inputs; `main` parses --root and --self-test, prints the findings and sets the exit status.
"""

import argparse
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(doc, name, check, self_test, summary="finding(s)"):
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--root", default=ROOT)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    errors = check(args.root)
    for e in errors:
        print(e)
    if errors:
        print(f"{name}: {len(errors)} {summary}")
        return 1
    print(f"{name}: ok")
    return 0


def write(root, rel, text):
    """Writes `text` to root/rel, making its folders (the self-tests' fixture trees)."""
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def verdict(failures):
    """The self-test's last line and exit status."""
    print("self-test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


def expand_braces(pattern):
    """`a/{b,c}_test` -> [`a/b_test`, `a/c_test`], as a shell expands a brace list."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [x for alt in m.group(1).split(",")
            for x in expand_braces(pattern[:m.start()] + alt + pattern[m.end():])]
