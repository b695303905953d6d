"""The command line shared by the convention checks of scripts/check-*.py.

Each check is a function root -> list of findings plus a self-test that runs it on broken
inputs; `main` parses --root and --self-test, prints the findings and sets the exit status.
"""

import argparse
import os
import re
import tempfile

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


def run_cases(check, clean, broken):
    """The usual self-test: `check` finds nothing in the `clean` tree ({path: text}) and, for
    each case of `broken` ({name: (files, expected)}), a finding containing `expected` in the
    clean tree with `files` laid over it (a text of None leaves that file out)."""
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases = {"clean": ({}, None), **broken}
        for i, (name, (files, expected)) in enumerate(cases.items()):
            root = os.path.join(tmp, str(i))
            for rel, text in {**clean, **files}.items():
                if text is not None:
                    write(root, rel, text)
            errors = check(root)
            ok = not errors if expected is None else any(expected in e for e in errors)
            shown = next((e for e in errors if expected and expected in e), errors or "clean")
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {shown}")
            failures += not ok
    return verdict(failures)


def expand_braces(pattern):
    """`a/{b,c}_test` -> [`a/b_test`, `a/c_test`], as a shell expands a brace list."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [x for alt in m.group(1).split(",")
            for x in expand_braces(pattern[:m.start()] + alt + pattern[m.end():])]
