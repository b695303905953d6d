#!/usr/bin/env python3
"""Lists the longest C++ functions in the given folders or files (a report, not a check).

  function-lengths.py [--top N] [--over LINES] PATH...

Prints "lines  file:line  name" for each function body at namespace or class scope (lambdas
and local classes count toward the function that holds them), longest first, then each
file's line count. Test files (*_test.cc) and fuzzers are included only with --tests. A
heuristic over the text with comments and string literals blanked out; good enough to quote
sizes before and after a split, not a parser.
"""

import argparse
import os
import re
import sys

CONTROL = {"if", "for", "while", "switch", "catch", "do", "else", "try", "return"}
SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$")


def blank(text):
    """Comments and string/char literals replaced by spaces, newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(lines, first line, name) per function body at namespace/class scope."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = blank(f.read())
    found = []
    stack = []  # per open brace: "scope", "function" or "block"
    head_start = 0  # offset where the text before the next brace at this level starts
    for i, c in enumerate(text):
        if c in ";}":
            if c == "}" and stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    first = text.count("\n", 0, start) + 1
                    last = text.count("\n", 0, i) + 1
                    found.append((last - first + 1, first, name))
            head_start = i + 1
        elif c == "{":
            in_function = any(k != "scope" for k, _, _ in stack)
            head = text[head_start:i]
            kind, name = "block", ""
            if not in_function:
                if SCOPE.search(head) or head.strip().startswith("extern"):
                    kind = "scope"
                elif "(" in head and not re.search(r"=\s*$", head):
                    words = re.findall(r"[A-Za-z_~][\w:~]*(?=\s*\()", head)
                    words = [w for w in words if w not in CONTROL]
                    if words:
                        kind, name = "function", words[0]
                        # A constructor's initializer list: the name is before its ')' ':'.
                        m = re.search(r"([A-Za-z_~][\w:~]*)\s*\([^;]*\)\s*(const\s*)?:", head)
                        if m:
                            name = m.group(1)
                if kind == "block" and not stack:
                    kind = "scope"  # e.g. an initializer at namespace scope
                elif kind == "block":
                    kind = "scope" if all(k == "scope" for k, _, _ in stack) else "block"
            start = head_start + len(head) - len(head.lstrip())
            stack.append((kind, start, name))
            head_start = i + 1
    return found


def files_under(paths, tests):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, _, names in os.walk(p):
            for name in sorted(names):
                if not name.endswith((".cc", ".h")):
                    continue
                if not tests and (name.endswith("_test.cc") or name.startswith("fuzz_")):
                    continue
                yield os.path.join(root, name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--top", type=int, default=15, help="functions to list (default 15)")
    parser.add_argument("--over", type=int, default=0, help="list only functions over LINES")
    parser.add_argument("--tests", action="store_true", help="include *_test.cc and fuzz_*.cc")
    args = parser.parse_args()
    rows, sizes = [], []
    for path in files_under(args.paths, args.tests):
        with open(path, encoding="utf-8", errors="replace") as f:
            sizes.append((sum(1 for _ in f), path))
        rows += [(n, f"{path}:{line}", name) for n, line, name in functions(path)]
    rows.sort(key=lambda r: -r[0])
    shown = [r for r in rows if r[0] > args.over][: args.top]
    print("longest functions (lines, where, name):")
    for n, where, name in shown:
        print(f"{n:6d}  {where}  {name}")
    print("longest files (lines):")
    for n, path in sorted(sizes, reverse=True)[: args.top]:
        print(f"{n:6d}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
