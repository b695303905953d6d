#!/usr/bin/env python3
"""clang's thread-safety analysis and the curated clang-tidy checks, in one pass per source.

  check-clang.py [--build-dir DIR] [--jobs N] [--annotated-only] [--list] [--verbose]
                 [--filter REGEX]
  check-clang.py --self-test

Reads DIR/compile_commands.json (the dev build records g++ commands; only their defines,
include paths, standard and -f flags are replayed, with clang 14) and checks:
  - every library source (src/, not *_test.cc or fuzz_*.cc) with clang-tidy: .clang-tidy's
    checks plus -Wthread-safety -Wthread-safety-beta (reported as
    clang-diagnostic-thread-safety-*), all errors;
  - tests, test/ and cmd/ sources where the analysis can find something, with clang++
    -fsyntax-only, the same warnings and -Werror: those whose source, own header (x.h beside
    x.cc) or directly included project headers use the annotations of core/sync.h
    (GUARDED_BY, REQUIRES, EXCLUDES, ACQUIRE, ...) or core::Mutex / MutexLock / CondVar.
--annotated-only restricts the library sources to such annotated ones too (a quicker pass
while iterating). Sources of modules in KLUTCH_THREAD_SAFETY_PENDING (cmake/KlutchTargets.cmake),
which still annotate std::mutex members, are skipped, and their headers are read as system
headers, until they move to core::Mutex. Exit status 1 on any finding, 0 when clean.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANNOTATION_RE = re.compile(
    r"\b(GUARDED_BY|PT_GUARDED_BY|REQUIRES|EXCLUDES|ACQUIRE|RELEASE|TRY_ACQUIRE|"
    r"ASSERT_CAPABILITY|RETURN_CAPABILITY|SCOPED_CAPABILITY|CAPABILITY)\s*\(|"
    r"\b(core::)?(Mutex|MutexLock|CondVar)\b")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
# Every annotated source includes sync.h; its own inline code is analysed there.
IGNORED_HEADERS = {"core/sync.h"}
WARNINGS = ["-Wthread-safety", "-Wthread-safety-beta"]
# Flags kept from the recorded command: they decide what the code means. Warning and code
# generation flags are dropped, so only the analysis and the checks can fail.
KEEP_WITH_VALUE = {"-I", "-D", "-U", "-isystem", "-iquote", "-include", "-std"}
KEEP_PREFIXES = ("-I", "-D", "-U", "-std=", "-isystem", "-iquote", "-include", "-f", "-pthread")
DROP_F = ("-fdiagnostics", "-fcolor", "-fsanitize", "-fprofile", "-fcoverage", "-fno-omit")


def find_tool(names, what):
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    sys.exit(f"check-clang: {what} not found (scripts/install-deps.sh installs it)")


def pending_modules(root):
    path = os.path.join(root, "cmake", "KlutchTargets.cmake")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        m = re.search(r"set\(KLUTCH_THREAD_SAFETY_PENDING([^)]*)\)", f.read())
    return m.group(1).split() if m else []


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def uses_annotations(root, source, cache):
    """Whether `source`, its own header or a project header it includes directly mentions
    an annotation or the annotated types."""
    text = read(source)
    if ANNOTATION_RE.search(text):
        return True
    candidates = [os.path.splitext(source)[0] + ".h"]
    for inc in INCLUDE_RE.findall(text):
        if inc not in IGNORED_HEADERS:
            candidates += [os.path.join(root, "src", inc), os.path.join(root, inc)]
    for header in candidates:
        if header not in cache:
            cache[header] = bool(ANNOTATION_RE.search(read(header)))
        if cache[header]:
            return True
    return False


def is_library(rel):
    name = os.path.basename(rel)
    return rel.startswith("src/") and not name.endswith("_test.cc") and not name.startswith("fuzz_")


def flags(entry, pending):
    args = entry.get("arguments") or shlex.split(entry["command"])
    out, i = [], 1
    while i < len(args):
        a = args[i]
        if a in KEEP_WITH_VALUE and i + 1 < len(args):
            out += [a, args[i + 1]]
            i += 2
            continue
        if a.startswith(KEEP_PREFIXES) and not a.startswith(DROP_F):
            out.append(a)
        i += 1
    return out + [f"--system-header-prefix={m}/" for m in pending] + WARNINGS


def command(tools, root, entry, pending):
    if entry["tidy"]:
        return [tools["tidy"], "--quiet", f"--config-file={os.path.join(root, '.clang-tidy')}",
                entry["file"], "--"] + flags(entry, pending)
    return [tools["clang"], "-fsyntax-only", "-Werror"] + flags(entry, pending) + [entry["file"]]


def select(root, entries, pending, all_library=False):
    cache, chosen, seen = {}, [], set()
    build_dirs = {os.path.realpath(e["directory"]) for e in entries}
    for e in entries:
        path = os.path.realpath(os.path.join(e["directory"], e["file"]))
        rel = os.path.relpath(path, root)
        if path in seen or rel.startswith("..") or any(
                path.startswith(b + os.sep) for b in build_dirs):
            continue  # outside the tree, generated in the build tree, or already chosen
        seen.add(path)
        if any(rel.startswith(f"src/{m}/") for m in pending):
            continue
        library = is_library(rel)
        if uses_annotations(root, path, cache) or (all_library and library):
            chosen.append(dict(e, file=path, tidy=library))
    return sorted(chosen, key=lambda e: e["file"])


def tools():
    return {"clang": find_tool(["clang++-14", "clang++"], "clang++-14"),
            "tidy": find_tool(["clang-tidy-14", "clang-tidy"], "clang-tidy")}


def run(root, chosen, jobs, verbose, pending):
    found = tools()

    def one(e):
        start = time.monotonic()
        p = subprocess.run(command(found, root, e, pending), cwd=e["directory"],
                           capture_output=True, text=True)
        return e, p.returncode, p.stdout + p.stderr, time.monotonic() - start

    start = time.monotonic()
    failed, totals = 0, {True: [0, 0.0], False: [0, 0.0]}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for e, rc, output, secs in pool.map(one, chosen):
            rel = os.path.relpath(e["file"], root)
            totals[e["tidy"]][0] += 1
            totals[e["tidy"]][1] += secs
            if verbose:
                print(f"{secs:5.1f}s {'tidy ' if e['tidy'] else 'clang'} {rel}")
            if rc != 0:
                failed += 1
                lines = [l for l in output.splitlines() if not l.endswith("warnings generated.")]
                print(f"--- {rel}\n" + "\n".join(lines))
    wall = time.monotonic() - start
    print(f"check-clang: {len(chosen)} translation units ({totals[True][0]} clang-tidy, "
          f"{totals[True][1]:.0f} s; {totals[False][0]} clang, {totals[False][1]:.0f} s), "
          f"{failed} failed, {wall:.1f} s wall with {jobs} jobs")
    return 1 if failed else 0


# --- self-test ---------------------------------------------------------------------------------

FIXTURES = {
    # path under the fixture root: (source, the diagnostic the check must print, or None)
    "test/unlocked_read_test.cc": ('''#include "core/sync.h"
class Counter {
 public:
  int Get() { return n_; }
 private:
  klutch::core::Mutex mu_;
  int n_ GUARDED_BY(mu_) = 0;
};
int F() { Counter c; return c.Get(); }
''', "reading variable 'n_' requires holding mutex 'mu_' [-Werror,-Wthread-safety-analysis]"),
    "test/std_mutex_test.cc": ('''#include <mutex>
#include "core/sync.h"
class Counter {
  std::mutex mu_;
  int n_ GUARDED_BY(mu_) = 0;
};
''', "[-Werror,-Wthread-safety-attributes]"),
    # A library source: through clang-tidy, the analysis reported as a check.
    "src/lib/missing_requires.cc": ('''#include "core/sync.h"
class Queue {
 public:
  void Push() { klutch::core::MutexLock lock(mu_); PushLocked(); }
  void Oops() { PushLocked(); }
 private:
  void PushLocked() REQUIRES(mu_) { ++n_; }
  klutch::core::Mutex mu_;
  int n_ GUARDED_BY(mu_) = 0;
};
''', "requires holding mutex 'mu_' exclusively [clang-diagnostic-thread-safety-analysis"),
    "src/lib/use_after_move.cc": ('''#include <string>
#include <utility>
#include "core/sync.h"
klutch::core::Mutex mu;
std::string Take(std::string s) {
  klutch::core::MutexLock lock(mu);
  std::string kept = std::move(s);
  return kept + s;
}
''', "[bugprone-use-after-move"),
    "src/lib/correct.cc": ('''#include "core/sync.h"
class Counter {
 public:
  int Get() { klutch::core::MutexLock lock(mu_); return n_; }
  void Wait() { klutch::core::MutexLock lock(mu_); while (n_ == 0) cv_.Wait(mu_); }
 private:
  klutch::core::Mutex mu_;
  klutch::core::CondVar cv_;
  int n_ GUARDED_BY(mu_) = 0;
};
''', None),
    # No annotation anywhere: not selected, so even a broken file is not compiled...
    "test/unannotated_test.cc": ("this is not C++ at all\n", None),
    # ...but every library source goes through clang-tidy (unless --annotated-only).
    "src/lib/unannotated_move.cc": ('''#include <string>
#include <utility>
std::string Take(std::string s) {
  std::string kept = std::move(s);
  return kept + s;
}
''', "all-library:[bugprone-use-after-move"),
}


def self_test():
    failures = 0
    found = tools()
    with tempfile.TemporaryDirectory() as tmp:
        build = os.path.join(tmp, "build")
        os.makedirs(build)
        entries = []
        for rel, (source, _) in FIXTURES.items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(source)
            # A g++ command as the dev build records it (its warnings are dropped).
            entries.append({"directory": build, "file": path,
                            "command": f"/usr/bin/c++ -I{ROOT}/src -O2 -Wall -Wextra -Werror "
                                       f"-std=c++20 -o x.o -c {path}"})
        shutil.copy(os.path.join(ROOT, ".clang-tidy"), tmp)
        chosen = {os.path.relpath(e["file"], tmp): e for e in select(tmp, entries, [])}
        every = {os.path.relpath(e["file"], tmp): e for e in select(tmp, entries, [], True)}
        for rel, (_, expected) in FIXTURES.items():
            picked = chosen.get(rel)
            if expected and expected.startswith("all-library:"):
                expected = expected.split(":", 1)[1]
                if picked:
                    print(f"FAIL {rel}: selected with --annotated-only")
                    failures += 1
                picked = every.get(rel)
            if picked is None:
                ok = expected is None
                print(f"{'ok  ' if ok else 'FAIL'} {rel}: not selected")
                failures += not ok
                continue
            p = subprocess.run(command(found, tmp, picked, []), cwd=build, capture_output=True,
                               text=True)
            output = p.stdout + p.stderr
            ok = p.returncode == 0 if expected is None else (p.returncode != 0 and expected in output)
            first = next((l for l in output.splitlines() if "error:" in l), "clean")
            tool = "clang-tidy" if picked["tidy"] else "clang"
            print(f"{'ok  ' if ok else 'FAIL'} {rel} ({tool}): {first.split(tmp + '/')[-1]}")
            if not ok:
                print(output)
            failures += not ok
    print("self-test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--annotated-only", action="store_true",
                        help="skip library sources without locking annotations")
    parser.add_argument("--list", action="store_true", help="print the chosen sources and exit")
    parser.add_argument("--verbose", action="store_true", help="print each source's time")
    parser.add_argument("--filter", default="", help="only sources whose path matches this regex")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    db = os.path.join(args.build_dir, "compile_commands.json")
    if not os.path.exists(db):
        sys.exit(f"check-clang: {db} is missing (configure with cmake --preset dev)")
    with open(db, encoding="utf-8") as f:
        entries = json.load(f)
    pending = pending_modules(ROOT)
    chosen = [e for e in select(ROOT, entries, pending, not args.annotated_only)
              if re.search(args.filter, e["file"])]
    if args.list:
        for e in chosen:
            print(("tidy  " if e["tidy"] else "clang ") + os.path.relpath(e["file"], ROOT))
        return 0
    return run(ROOT, chosen, args.jobs, args.verbose, pending)


if __name__ == "__main__":
    sys.exit(main())
