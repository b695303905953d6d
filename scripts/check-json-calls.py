#!/usr/bin/env python3
"""Finds throwing nlohmann::json calls in src/ outside src/machinery.

  check-json-calls.py [--root DIR]   check the tree (default: the repository of this script)
  check-json-calls.py --self-test    run the check on broken snippets and require it to fail

Request-derived JSON must not reach calls that throw (errors are values, CONVENTIONS.md):
  .dump(            use machinery::Dump (it replaces invalid UTF-8); a dump whose arguments name
                    error_handler_t::replace or ::ignore cannot throw and is accepted
  .get<  get_ref<   use machinery::GetString/Find/Strings, or get_ptr<const T*>() (nullptr on
                    a type mismatch)
  .at(              use find()/contains() or machinery::Find (std containers' at() throws too)
  Json::parse(      use machinery::ParseJson, or pass allow_exceptions = false as the last
                    argument (`Json::parse(text, nullptr, false)`)
A call whose receiver is provably not request-derived and cannot throw (a constant, a type
checked just before) may stay with `// json-ok: <why>` on the same line. Keep that rare.
*_test.cc files and src/machinery are exempt. scripts/json-calls-baseline.txt lists
`<file> <count>` for files whose owners have yet to fix them: such a file must hold exactly that
many, so new calls fail and fixed ones shrink the list.
"""

import os
import re
import sys
import tempfile

import checklib

CALL_RE = re.compile(
    r"(?P<dump>(?:\.|->)\s*dump\s*\()"
    r"|(?P<get>(?:\.|->)\s*(?:template\s+)?get\s*<)"
    r"|(?P<getref>\bget_ref\s*<)"
    r"|(?P<at>(?:\.|->)\s*at\s*\()"
    r"|(?P<parse>\b(?:Json|json|ordered_json)\s*::\s*parse\s*\()")
MARKER_RE = re.compile(r"//\s*json-ok:\s*\S")
NON_THROWING_DUMP_RE = re.compile(r"error_handler_t\s*::\s*(replace|ignore)")
ADVICE = {
    "dump": "throwing .dump(): use machinery::Dump",
    "get": "throwing .get<>(): use machinery::GetString/Find/Strings or get_ptr<const T*>()",
    "getref": "throwing get_ref<>(): use get_ptr<const T*>() or machinery::GetString",
    "at": "throwing .at(): use find()/contains() or machinery::Find",
    "parse": "throwing Json::parse(): use machinery::ParseJson or pass allow_exceptions = false",
}
EXEMPT_DIRS = ("src/machinery/",)


def blank_comments_and_strings(text):
    """The text with comments and the contents of string and character literals replaced by
    spaces (newlines kept), so offsets and line numbers stay those of the source."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_") or text[i - 1] in "8LuU"):
            open_paren = text.find("(", i + 2)
            delim = text[i + 2:open_paren]
            close = text.find(")" + delim + '"', open_paren)
            close = n if close < 0 else close
            blank(open_paren + 1, close)
            i = close + len(delim) + 2
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def call_arguments(code, open_paren):
    depth, i = 1, open_paren + 1
    while i < len(code) and depth:
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        i += 1
    return code[open_paren + 1:i - 1]


def accepted(kind, code, m):
    if kind == "dump":
        return bool(NON_THROWING_DUMP_RE.search(call_arguments(code, m.end() - 1)))
    if kind == "parse":
        args = call_arguments(code, m.end() - 1)
        return re.search(r",\s*false\s*$", args) is not None
    return False


def findings(path, rel):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    lines = text.splitlines()
    code = blank_comments_and_strings(text)
    out = []
    for m in CALL_RE.finditer(code):
        kind = m.lastgroup
        if accepted(kind, code, m):
            continue
        line = code.count("\n", 0, m.start()) + 1
        if MARKER_RE.search(lines[line - 1]):
            continue
        out.append(f"{rel}:{line}: {ADVICE[kind]}: {lines[line - 1].strip()}")
    return out


def load_baseline(root):
    path = os.path.join(root, "scripts", "json-calls-baseline.txt")
    baseline = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                words = line.split("#", 1)[0].split()
                if len(words) == 2 and words[1].isdigit():
                    baseline[words[0]] = int(words[1])
                elif words:
                    sys.exit(f"{path}: expected `<file> <count>`, got {line.strip()!r}")
    return baseline


def check(root):
    baseline = load_baseline(root)
    errors = []
    for dirpath, dirs, files in os.walk(os.path.join(root, "src")):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith((".h", ".cc")) or name.endswith("_test.cc"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if rel.startswith(EXEMPT_DIRS):
                continue
            found = findings(path, rel)
            expected = baseline.pop(rel, 0)
            if expected and len(found) == expected:
                continue
            if expected and len(found) < expected:
                errors.append(f"{rel}: {len(found)} throwing call(s), the baseline says {expected}: "
                              "lower its count in scripts/json-calls-baseline.txt")
                continue
            errors += found
    for rel in baseline:
        errors.append(f"{rel}: listed in scripts/json-calls-baseline.txt but gone or clean: "
                      "remove the line")
    return errors


# --- self-test ---------------------------------------------------------------------------------

GOOD = r'''#include <nlohmann/json.hpp>
// A comment may say .dump( or .at( or Json::parse(text).
std::string A(const Json& j) { return machinery::Dump(j); }
std::string B(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }
Json C(std::string_view t) { return Json::parse(t, nullptr, /*allow_exceptions=*/false); }
Json D(std::string_view t) {
  return Json::parse(t, nullptr,
                     false);
}
const std::string* E(const Json& j) { return j.get_ptr<const std::string*>(); }
static const Json kF = Json::parse(R"({"a": ".at(1)"})");  // json-ok: a constant
const char* G = "x.dump() and y.get<int>()";
int H(const Json& j) { return j.is_number_integer() ? j.get<int>() : 0; }  // json-ok: checked
'''
BAD = {
    "dump": ("std::string A(const Json& j) { return j.dump(); }\n", "throwing .dump()"),
    "arrow dump": ("std::string A(const Json* j) { return j->dump(2); }\n", "throwing .dump()"),
    "get": ("std::string A(const Json& j) { return j.get<std::string>(); }\n", "throwing .get<>()"),
    "arrow get": ("int A(const Json* j) { return j->get<int>(); }\n", "throwing .get<>()"),
    "get_ref": ("auto& A(const Json& j) { return j.get_ref<const std::string&>(); }\n",
                "throwing get_ref<>()"),
    "at": ("const Json& A(const Json& j) { return j.at(\"aud\"); }\n", "throwing .at()"),
    "parse": ("Json A(const std::string& t) { return Json::parse(t); }\n", "throwing Json::parse()"),
    "parse with callback only": ("Json A(const std::string& t) { return nlohmann::json::parse(t, cb); }\n",
                                 "throwing Json::parse()"),
    "marker without reason": ("int A(const Json& j) { return j.get<int>(); }  // json-ok:\n",
                              "throwing .get<>()"),
    "marker on another line": ("// json-ok: not this line\nint A(const Json& j) { return j.get<int>(); }\n",
                               "throwing .get<>()"),
    "raw string then call": ('auto s = R"x(")x"; int A(const Json& j) { return j.at(0); }\n',
                             "throwing .at()"),
}


def self_test():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, "clean")
        checklib.write(clean, "src/auth/good.cc", GOOD)
        checklib.write(clean, "src/auth/good_test.cc", BAD["get"][0])
        checklib.write(clean, "src/machinery/json.cc", BAD["dump"][0])
        errors = check(clean)
        if errors:
            failures += 1
            print("FAIL clean tree reported:\n  " + "\n  ".join(errors))
        for i, (name, (snippet, expected)) in enumerate(BAD.items()):
            root = os.path.join(tmp, f"bad{i}")
            checklib.write(root, "src/auth/good.cc", GOOD)
            checklib.write(root, "src/auth/bad.cc", snippet)
            errors = check(root)
            hit = [e for e in errors if expected in e and e.startswith("src/auth/bad.cc:")]
            if hit and len(errors) == 1:
                print(f"ok   {name}: {hit[0]}")
            else:
                failures += 1
                print(f"FAIL {name}: expected one finding containing {expected!r}, got {errors}")
        # The baseline: exact counts pass, a new call fails, a fixed call asks to shrink it.
        root = os.path.join(tmp, "baseline")
        checklib.write(root, "src/codec/old.cc", BAD["get"][0] + BAD["at"][0])
        for counts, expected in ((2, None), (1, "throwing .get<>()"), (3, "lower its count"),
                                 (None, "throwing .at()")):
            checklib.write(root, "scripts/json-calls-baseline.txt",
                           "" if counts is None else f"src/codec/old.cc {counts}\n")
            errors = check(root)
            ok = not errors if expected is None else any(expected in e for e in errors)
            print(f"{'ok  ' if ok else 'FAIL'} baseline {counts}: {errors or 'clean'}")
            failures += not ok
        checklib.write(root, "scripts/json-calls-baseline.txt",
                       "src/codec/old.cc 2\nsrc/codec/gone.cc 1\n")
        errors = check(root)
        ok = any("gone.cc: listed in" in e for e in errors)
        print(f"{'ok  ' if ok else 'FAIL'} stale baseline entry: {errors}")
        failures += not ok
    return checklib.verdict(failures)


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, "check-json-calls", check, self_test,
                          "finding(s); see the top of scripts/check-json-calls.py"))
