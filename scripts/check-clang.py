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
while iterating). Sources of one module and kind are checked up to BATCH at a time as one
unity translation unit (their shared headers parsed once: src/apiserver's 23 sources take 37 s
of CPU in batches of 8 and 22 s as one batch); a batch with any finding or error is
checked again source by source, so verdicts stay per source. A source that passed is
remembered in DIR/check-clang-cache under a hash of
what it read (the files ninja recorded as its dependencies, or its clang -E output where there
is no record), its command, .clang-tidy, the tools' versions and this script, so a later run
checks only what changed; --no-cache checks everything. Sources of modules in KLUTCH_THREAD_SAFETY_PENDING
(cmake/KlutchTargets.cmake; empty now), which would still annotate std::mutex members, are
skipped, and their headers are read as system headers, until they move to core::Mutex. Exit status 1 on any finding, 0 when clean.
"""

import argparse
import concurrent.futures
import contextlib
import hashlib
import io
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
# CMake's precompiled header, which the tests' commands force-include (cmake_pch.hxx, made by
# g++ into cmake_pch.hxx.gch).
PCH_SUFFIX = "cmake_pch.hxx"
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
        if a == "-include" and i + 1 < len(args) and args[i + 1].endswith(PCH_SUFFIX):
            i += 2  # g++'s precompiled header (ADR 0016): clang cannot read it, and a source
            continue  # includes what it uses anyway
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


UNITY_RE = re.compile(r"/Unity/unity_[0-9]+_cxx\.cxx$")


def expand_unity(entries):
    """A unity build (CMAKE_UNITY_BUILD) records one command per generated unity_N_cxx.cxx; the
    check wants the sources, so each such entry becomes one entry per source it includes."""
    out = []
    for e in entries:
        path = os.path.join(e["directory"], e["file"])
        if not UNITY_RE.search(path):
            out.append(e)
            continue
        for source in INCLUDE_RE.findall(read(path)):
            out.append(dict(e, file=source))
    return out


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


class Cache:
    """Names of the checks that passed, keyed by everything their verdict depends on.

    A source's key covers the command and the text of every file its translation unit read:
    the dependency list ninja recorded when the build compiled it (`ninja -t deps`; for a
    unity batch the whole batch's, a superset), each file hashed once per run. Where the build
    has no valid record (another generator, a source not built yet, an object older than its
    record) the source is preprocessed with clang -E instead, 0.3-0.8 s a source: 78 s of CPU
    for the 301 sources of a warm run before the records were used."""

    def __init__(self, root, build_dir, found):
        self.dir = os.path.join(build_dir, "check-clang-cache")
        os.makedirs(self.dir, exist_ok=True)
        salt = hashlib.sha256()
        for path in (os.path.join(root, ".clang-tidy"), os.path.abspath(__file__)):
            salt.update(read(path).encode())
        for tool in (found["clang"], found["tidy"]):
            salt.update(subprocess.run([tool, "--version"], capture_output=True,
                                       text=True).stdout.encode())
        self.salt = salt.digest()
        self.deps = ninja_deps(build_dir)
        self.digests = {}

    def digest(self, path):
        """The file's content hash, or a marker when it cannot be read (a deleted header)."""
        if path not in self.digests:
            try:
                with open(path, "rb") as f:
                    self.digests[path] = hashlib.sha256(f.read()).digest()
            except OSError:
                self.digests[path] = b"missing"
        return self.digests[path]

    def key(self, found, entry, cmd):
        """The entry's key, or None when its source does not preprocess."""
        h = hashlib.sha256(self.salt)
        h.update("\0".join(cmd).encode())
        deps = self.deps.get(object_of(entry))
        if deps is not None and os.path.realpath(entry["file"]) in deps:
            for dep in deps:
                h.update(dep.encode() + b"\0" + self.digest(dep))
            return os.path.join(self.dir, h.hexdigest())
        pre = subprocess.run([found["clang"], "-E"] + flags(entry, []) + [entry["file"]],
                             cwd=entry["directory"], capture_output=True)
        if pre.returncode != 0:
            return None
        h.update(pre.stdout)
        return os.path.join(self.dir, h.hexdigest())


def object_of(entry):
    """The object file an entry's command writes, as an absolute path ("" when none)."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    for i, a in enumerate(args[:-1]):
        if a == "-o":
            return os.path.realpath(os.path.join(entry["directory"], args[i + 1]))
    return ""


def ninja_deps(build_dir):
    """{object: [dependency, ...]} from ninja's log of the headers each compile read, the
    records ninja itself marks VALID only, with absolute paths; {} without ninja."""
    if not os.path.exists(os.path.join(build_dir, ".ninja_deps")) or not shutil.which("ninja"):
        return {}
    p = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], capture_output=True, text=True)
    if p.returncode != 0:
        return {}
    out, current = {}, None
    for line in p.stdout.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" "):
            m = re.match(r"^(.*): #deps \d+, deps mtime \d+ \((\w+)\)$", line)
            current = None
            if m and m.group(2) == "VALID":
                current = out.setdefault(
                    os.path.realpath(os.path.join(build_dir, m.group(1))), [])
        elif current is not None:
            current.append(os.path.realpath(os.path.join(build_dir, line.strip())))
    return out


BATCH = 32  # sources parsed together in one unity translation unit: a module's, mostly


def batch_command(tools, root, entries, pending, unity_path):
    """One command checking `entries` (same kind, same flags) as a single translation unit
    that includes each source: the headers they share are parsed once instead of per source."""
    with open(unity_path, "w", encoding="utf-8") as f:
        for e in entries:
            f.write(f'#include "{e["file"]}"\n')
    return command(tools, root, dict(entries[0], file=unity_path), pending)


def batches(entries, size):
    """Groups of at most `size` entries of one module, one kind and identical flags."""
    groups = {}
    for e in entries:
        module = os.path.dirname(e["file"])
        groups.setdefault((e["tidy"], module, tuple(flags(e, []))), []).append(e)
    out = []
    for group in groups.values():
        for i in range(0, len(group), size):
            out.append(group[i:i + size])
    return out


def run(root, chosen, jobs, verbose, pending, cache=None, batch=BATCH):
    found = tools()
    start = time.monotonic()

    def key_of(e):
        return cache.key(found, e, command(found, root, e, pending)) if cache else None

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        keys = list(pool.map(key_of, chosen))
    todo = [dict(e, key=k) for e, k in zip(chosen, keys) if not (k and os.path.exists(k))]
    reused = len(chosen) - len(todo)
    tmp = tempfile.mkdtemp(prefix="check-clang-")

    def remember(e):
        if e["key"]:
            with open(e["key"], "w", encoding="utf-8"):
                pass

    def single(e):
        t = time.monotonic()
        p = subprocess.run(command(found, root, e, pending), cwd=e["directory"],
                           capture_output=True, text=True)
        if p.returncode == 0:
            remember(e)
        return [(e, p.returncode, p.stdout + p.stderr, time.monotonic() - t)]

    def group(entries):
        results, queue = [], [entries]
        while queue:
            batch = queue.pop()
            if len(batch) == 1:
                results += single(batch[0])
                continue
            t = time.monotonic()
            unity = os.path.join(tmp, hashlib.sha256(
                "\0".join(e["file"] for e in batch).encode()).hexdigest()[:16] + ".cc")
            p = subprocess.run(batch_command(found, root, batch, pending, unity),
                               cwd=batch[0]["directory"], capture_output=True, text=True)
            if p.returncode == 0:
                secs = (time.monotonic() - t) / len(batch)
                for e in batch:
                    remember(e)
                results += [(e, 0, "", secs) for e in batch]
                continue
            # A finding, or sources that do not combine (one redefines a name another
            # defines in its anonymous namespace): the sources an error names are checked on
            # their own, for exact verdicts; the rest together again.
            output = p.stdout + p.stderr
            named = {e["file"] for e in batch
                     if re.search(re.escape(e["file"]) + r":\d+:\d+: error:", output)}
            if not named:
                results += [r for e in batch for r in single(e)]
                continue
            for e in batch:
                if e["file"] in named:
                    results += single(e)
            rest = [e for e in batch if e["file"] not in named]
            if rest:
                queue.append(rest)
        return results

    failed, totals = 0, {True: [0, 0.0], False: [0, 0.0]}
    pending_files = {t["file"] for t in todo}
    for e in chosen:
        if e["file"] not in pending_files:
            totals[e["tidy"]][0] += 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for results in pool.map(group, batches(todo, batch)):
            for e, rc, output, secs in results:
                rel = os.path.relpath(e["file"], root)
                totals[e["tidy"]][0] += 1
                totals[e["tidy"]][1] += secs
                if verbose:
                    print(f"{secs:5.1f}s {'tidy ' if e['tidy'] else 'clang'} {rel}")
                if rc != 0:
                    failed += 1
                    lines = [l for l in output.splitlines()
                             if not l.endswith("warnings generated.")]
                    print(f"--- {rel}\n" + "\n".join(lines))
    shutil.rmtree(tmp, ignore_errors=True)
    wall = time.monotonic() - start
    print(f"check-clang: {len(chosen)} translation units ({totals[True][0]} clang-tidy, "
          f"{totals[True][1]:.0f} s; {totals[False][0]} clang, {totals[False][1]:.0f} s; "
          f"{reused} unchanged since they last passed), {failed} failed, "
          f"{wall:.1f} s wall with {jobs} jobs")
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
        pch = os.path.join(build, "CMakeFiles", "t_pch.dir", PCH_SUFFIX)
        os.makedirs(os.path.dirname(pch))
        with open(pch, "w", encoding="utf-8") as f:
            f.write("#error the precompiled header is not for clang\n")
        with open(pch + ".gch", "wb") as f:
            f.write(b"gpch.014 not a clang precompiled header")
        entries = []
        for rel, (source, _) in FIXTURES.items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(source)
            # A g++ command as the dev build records it (its warnings are dropped), with a
            # precompiled header of g++'s that clang cannot read (dropped too).
            entries.append({"directory": build, "file": path,
                            "command": f"/usr/bin/c++ -I{ROOT}/src -O2 -Wall -Wextra -Werror "
                                       f"-Winvalid-pch -include {pch} "
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
        failures += unity_self_test(build, entries)
        failures += cache_self_test(tmp, build, found)
        failures += batch_self_test(tmp, build)
    print("self-test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


def unity_self_test(build, entries):
    """A unity build's one entry per unity_N_cxx.cxx comes back as the sources it includes."""
    unity = os.path.join(build, "src", "m", "CMakeFiles", "t.dir", "Unity", "unity_0_cxx.cxx")
    os.makedirs(os.path.dirname(unity))
    with open(unity, "w", encoding="utf-8") as f:
        f.write("/* generated by CMake */\n\n")
        f.writelines(f'#include "{e["file"]}"\n\n' for e in entries)
    recorded = dict(entries[0], file=unity)
    got = [e["file"] for e in expand_unity([recorded])]
    ok = got == [e["file"] for e in entries] and all(
        e["command"] == recorded["command"] for e in expand_unity([recorded]))
    print(f"{'ok  ' if ok else 'FAIL'} a unity entry expands to its {len(entries)} sources")
    return 0 if ok else 1


def cache_self_test(tmp, build, found):
    """A source that passed is not analysed again until its text (or a header's) changes, and
    a source that failed is never remembered."""
    header = os.path.join(tmp, "src/cached/counter.h")
    source = os.path.join(tmp, "src/cached/c.cc")
    os.makedirs(os.path.dirname(header))
    with open(source, "w", encoding="utf-8") as f:
        f.write('#include "cached/counter.h"\nint F(Counter& c) { return c.Get(); }\n')
    entry = {"directory": build, "file": source, "tidy": True,
             "command": f"/usr/bin/c++ -I{ROOT}/src -I{tmp}/src -std=c++20 -c {source}"}
    cache = Cache(tmp, build, found)
    failures = 0

    def check(header_text, expect_rc, expect_reused, what):
        nonlocal failures
        with open(header, "w", encoding="utf-8") as f:
            f.write(header_text)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = run(tmp, [entry], 1, False, [], cache)
        reused = f"; {expect_reused} unchanged since" in out.getvalue()
        ok = rc == expect_rc and reused
        print(f"{'ok  ' if ok else 'FAIL'} cache: {what}")
        if not ok:
            print(out.getvalue())
        failures += not ok

    good = FIXTURES["src/lib/correct.cc"][0].replace("class Counter", "#pragma once\nclass Counter")
    bad = good.replace("int Get() { klutch::core::MutexLock lock(mu_); return n_; }",
                       "int Get() { return n_; }")
    check(good, 0, 0, "first run analyses the source")
    check(good, 0, 1, "second run reuses the verdict")
    check(bad, 1, 0, "a changed header is analysed again and fails")
    check(bad, 1, 0, "a failure is not remembered")
    return failures


def batch_self_test(tmp, build):
    """Sources checked together still get their own verdicts: a finding names its source
    only, and sources whose anonymous namespaces clash (fine apart, an error together) pass."""
    sources = {
        "src/batch/a.cc": "namespace { int Helper() { return 1; } }\nint A() { return Helper(); }\n",
        "src/batch/b.cc": "namespace { int Helper() { return 2; } }\nint B() { return Helper(); }\n",
        "src/batch/c.cc": FIXTURES["src/lib/use_after_move.cc"][0].replace("mu;", "mu_c;")
                          .replace("lock(mu)", "lock(mu_c)"),
    }
    entries = []
    for rel, text in sources.items():
        path = os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        entries.append({"directory": build, "file": path, "tidy": True,
                        "command": f"/usr/bin/c++ -I{ROOT}/src -std=c++20 -c {path}"})
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = run(tmp, entries, 1, False, [], None, batch=3)
    text = out.getvalue()
    ok = (rc == 1 and "--- src/batch/c.cc" in text and "--- src/batch/a.cc" not in text
          and "--- src/batch/b.cc" not in text and "1 failed" in text)
    print(f"{'ok  ' if ok else 'FAIL'} batch: a finding names its own source, clashing "
          f"sources pass")
    if not ok:
        print(text)
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--annotated-only", action="store_true",
                        help="skip library sources without locking annotations")
    parser.add_argument("--list", action="store_true", help="print the chosen sources and exit")
    parser.add_argument("--verbose", action="store_true", help="print each source's time")
    parser.add_argument("--filter", default="", help="only sources whose path matches this regex")
    parser.add_argument("--no-cache", action="store_true",
                        help="check every source, also those unchanged since they passed")
    parser.add_argument("--batch", type=int, default=BATCH,
                        help="sources checked together in one unity translation unit (1: each "
                             "on its own)")
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
    entries = expand_unity(entries)
    chosen = [e for e in select(ROOT, entries, pending, not args.annotated_only)
              if re.search(args.filter, e["file"])]
    if args.list:
        for e in chosen:
            print(("tidy  " if e["tidy"] else "clang ") + os.path.relpath(e["file"], ROOT))
        return 0
    cache = None if args.no_cache else Cache(ROOT, args.build_dir, tools())
    return run(ROOT, chosen, args.jobs, args.verbose, pending, cache, max(1, args.batch))


if __name__ == "__main__":
    sys.exit(main())
