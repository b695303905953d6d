#!/usr/bin/env python3
"""Checks the paths the tree cites and the paths it holds.

  check-paths.py [--root DIR]   check the tree (default: the repository of this script)
  check-paths.py --self-test    run the check on broken trees and require it to fail

1. A path a README.md or a page under docs/ (ADRs, architecture.md, ...) cites exists. A cited
   path is a backticked span or a link target without whitespace that
     - is no URL (`https:`), no absolute path (`/healthz`: rule 2), no home (`~/`) or outside
       (`../shared/...`) path, holds no placeholder (`<x>`, `$X`, `...`) and is no build output
       or installed package (`build/`, `build-fuzz/`, `.data/`, `node_modules`);
     - and either has a `/` after a top-level folder of the repository (`src/core/status.h`), a
       src/ module (`core/status.cc`, as an #include names it) or an entry beside the citing file
       (`cel/skipped.txt`), or is a bare file name with a source extension (`engine.h`).
   It exists relative to the root, to src/ or to the citing file's folder; a bare file name
   anywhere below that folder (a docs/ page's: anywhere in the tree); a path naming a klutch_test()
   target (`test/e2e/broker_e2e_test`) where that folder declares it. A glob (`*`, `?`, `{a,b}`)
   must match something: `test/support/xrd.*` with no such file is a stale citation too.
2. No text file of the tree (build trees, hidden folders and installed packages aside) holds a
   path below a root that holds one machine's or one user's files: /work, /home, /root, /tmp,
   /var/tmp, /Users. The bare folders are the same everywhere and allowed (`mountPath: /tmp`,
   "a directory under /tmp", `"/tmp/" + name`), as are system paths the product uses on its
   Debian platform (/usr/bin, /etc, /var/lib, /proc: not in the list). Allowed below those roots:
     /tmp/<name>XXXXXX   a mkdtemp template: a fresh directory per run, not a machine's
     /home/me/, /tmp/x/  the imaginary user and folder of the kubeconfig tests and contract
"""

import fnmatch
import glob
import os
import re
import sys

import checklib
from srctree import SKIPPED_DIRS, present_modules, test_targets

CITATION_RE = re.compile(r"`([^`]+)`|\]\(([^)\s]+)\)")
SOURCE_FILE_RE = re.compile(r"[A-Za-z0-9_][\w.-]*\.(h|cc|inc|cmake|py|sh|mjs|md|scenario)")
NOT_A_PATH_RE = re.compile(r"^([a-z][a-z0-9+.-]*:|/|~|\.\./)|[<>$\s]|\.\.\.")
BUILD_OUTPUT_RE = re.compile(r"^(build[^/]*|\.data)(/|$)|(^|/)node_modules(/|$)")
GLOB_RE = re.compile(r"[*?{\[]")
MACHINE_PATH_RE = re.compile(
    r"(?<![\w.~/-])/(?:work|home|root|tmp|var/tmp|Users)/[\w.-][^\s\"'`()<>,;:\\]*")
ALLOWED_MACHINE_PATHS = (
    re.compile(r"/tmp/[\w.-]*XXXXXX"),  # mkdtemp / mktemp templates
    re.compile(r"/(home/me|tmp/x)(/.*)?"),  # the kubeconfig tests' imaginary user and folder
)


def walk(root, top="."):
    """Files below root/top (relative to root), skipping build trees, hidden folders and
    installed packages, sorted."""
    found = []
    for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
        dirnames[:] = sorted(d for d in dirnames
                             if not SKIPPED_DIRS.match(d) and not d.startswith("."))
        found += [os.path.normpath(os.path.relpath(os.path.join(dirpath, n), root))
                  for n in files]
    return sorted(found)


def cited_documents(files):
    return [f for f in files
            if os.path.basename(f) == "README.md" or re.fullmatch(r"docs/.*\.md", f)]


class Tree:
    """What a citation may resolve to: the files, folders and test targets of the tree."""

    def __init__(self, root):
        self.root = root
        self.files = walk(root)
        self.paths = set(self.files)
        for f in self.files:
            d = os.path.dirname(f)
            while d and d not in self.paths:
                self.paths.add(d)
                d = os.path.dirname(d)
        self.tops = {p for p in self.paths if "/" not in p}
        self.modules = set(present_modules(root)) if os.path.isdir(f"{root}/src") else set()
        self.targets = {f"{os.path.dirname(cmake)}/{t}" for t, cmake in test_targets(root).items()}

    def bases(self, folder):
        return ["", "src/", folder + "/" if folder else ""]

    def is_citation(self, text, folder):
        if NOT_A_PATH_RE.search(text) or BUILD_OUTPUT_RE.search(text):
            return False
        if "/" not in text:
            return bool(SOURCE_FILE_RE.fullmatch(text))
        first = text.split("/", 1)[0]
        return (first in self.tops or first in self.modules
                or os.path.normpath(os.path.join(folder, first)) in self.paths)

    def exists(self, text, folder, anywhere):
        """Whether `text` (no glob) names a file, folder or test target."""
        if "/" not in text.rstrip("/") and not text.endswith("/"):
            under = "" if anywhere else folder
            return any(os.path.basename(f) == text and (not under or f.startswith(under + "/"))
                       for f in self.files)
        candidates = {os.path.normpath(b + text.rstrip("/")) for b in self.bases(folder)}
        return bool(candidates & (self.paths | self.targets))

    def matches(self, pattern, folder, anywhere):
        """Whether the glob `pattern` matches a file, folder or test target."""
        if "/" not in pattern:
            under = "" if anywhere else folder
            return any(fnmatch.fnmatchcase(os.path.basename(f), pattern)
                       and (not under or f.startswith(under + "/")) for f in self.files)
        for base in self.bases(folder):
            full = os.path.normpath(base + pattern.rstrip("/"))
            if any(fnmatch.fnmatchcase(p, full) for p in self.paths | self.targets):
                return True
            if glob.glob(os.path.join(self.root, full), recursive=True):
                return True
        return False


def check_citations(root, tree, errors):
    for doc in cited_documents(tree.files):
        folder = os.path.dirname(doc)
        anywhere = doc.startswith("docs/") or folder == ""
        with open(os.path.join(root, doc), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in CITATION_RE.finditer(text):
            cited = (m.group(1) or m.group(2)).strip()
            if m.group(2):
                cited = cited.split("#", 1)[0]
            if not cited or not tree.is_citation(cited, folder):
                continue
            line = text.count("\n", 0, m.start()) + 1
            for alt in checklib.expand_braces(cited):
                found = (tree.matches(alt, folder, anywhere) if GLOB_RE.search(alt)
                         else tree.exists(alt, folder, anywhere))
                if not found:
                    errors.append(f"{doc}:{line}: cites `{alt}`, which does not exist")


def check_machine_paths(root, files, errors):
    for rel in files:
        try:
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        text = data.decode("utf-8", errors="replace")
        for m in MACHINE_PATH_RE.finditer(text):
            path = m.group(0).rstrip(".")
            if any(a.fullmatch(path) for a in ALLOWED_MACHINE_PATHS):
                continue
            line = text.count("\n", 0, m.start()) + 1
            errors.append(f"{rel}:{line}: names {path}, a path of one machine (say what it is: "
                          "`../shared/...`, a temp dir, $HOME)")


def check(root):
    errors = []
    tree = Tree(root)
    check_citations(root, tree, errors)
    check_machine_paths(root, tree.files, errors)
    return errors


# --- self-test ---------------------------------------------------------------------------------

WORK, TMP, HOME, ROOT = "/" + "work", "/" + "tmp", "/" + "home", "/" + "root"  # not in this file
CLEAN = {
    "README.md": "# Klutch\n\nSee `docs/architecture.md`, [ADRs](docs/decisions/) and `status.h`;\n"
                 "run `build/bin/klutch` or `make`; served at `/healthz`; `https://x.io/a/b`;\n"
                 "state in `.data/pki/`, `DIR/pki`, `<dir>/x.h`, `~/.kube/config`, `$WORK/a`;\n"
                 "specs in `../shared/specs/bind-protocol.md` and `klutch.anynines.com/syncer`.\n",
    "docs/architecture.md": "`src/core/sub/x.cc`, [ADRs](decisions/), `status.h`.\n",
    "docs/notes.txt": "`src/gone.h`: not a README nor a docs/ page, not checked.\n",
    "docs/decisions/0001-errors.md": "# ADR\n\n`core/status.h`, `status.h` and `src/core/`.\n",
    "src/core/status.h": f"// Errors. A directory under {TMP}; `\"{TMP}/\" + name`.\n",
    "src/core/README.md": "# core\n\n`status.h`, `sub/x.cc`, `*.h`, `test/e2e/{a,b}_test`, "
                          "`core/status.h`, `identity.json`.\n",
    "src/core/sub/x.cc": f'char t[] = "{TMP}/klutch-x-XXXXXX"; // {HOME}/me/.kube/config\n',
    "test/e2e/CMakeLists.txt": "klutch_test(a_test)\nklutch_test(b_test)\n",
    "deploy/x/deployment.yaml": f"mountPath: {TMP}\nkubectl: /usr/bin/kubectl\n",
}
BROKEN = {
    "moved file": ({"docs/decisions/0002-moved.md": "`core/protobuf.cc`\n"},
                   "docs/decisions/0002-moved.md:1: cites `core/protobuf.cc`"),
    "architecture cites a gone file": ({"docs/architecture.md": "`src/core/engine.h`\n"},
                                       "docs/architecture.md:1: cites `src/core/engine.h`"),
    "relative file gone": ({"src/core/README.md": "`sub/y.cc`\n"}, "cites `sub/y.cc`"),
    "bare file gone": ({"src/core/README.md": "`engine.h`\n"}, "cites `engine.h`"),
    "glob matching nothing": ({"test/README.md": "`test/support/xrd.*`\n"},
                              "cites `test/support/xrd.*`"),
    "brace alternative gone": ({"src/core/README.md": "`test/e2e/{a,c}_test`\n"},
                               "cites `test/e2e/c_test`"),
    "link target gone": ({"README.md": "[the map](docs/map.md#modules)\n"}, "cites `docs/map.md`"),
    "folder gone": ({"README.md": "`deploy/y/`\n"}, "cites `deploy/y/`"),
    "work path in a comment": ({"src/core/a.h": f"// see {WORK}/shared/specs/x.md\n"},
                               f"src/core/a.h:1: names {WORK}/shared/specs/x.md"),
    "home path in a doc": ({"docs/x.md": f"ran in {HOME}/alice/klutch.\n"},
                           f"names {HOME}/alice/klutch,"),
    "tmp file in a test": ({"test/e2e/a_test.cc": f'Run("{TMP}/p24/brief");\n'},
                           f"names {TMP}/p24/brief"),
    "root home in a script": ({"scripts/x.sh": f"cp a {ROOT}/.kube/config\n"},
                              f"names {ROOT}/.kube/config"),
}


def self_test():
    return checklib.run_cases(check, CLEAN, BROKEN)


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, "check-paths", check, self_test, "stale or machine path(s)"))
