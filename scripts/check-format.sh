#!/usr/bin/env bash
# Fails when a C++ file differs from what clang-format (.clang-format) would make of it.
set -euo pipefail
cd "$(dirname "$0")/.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files '*.h' '*.cc')
else
  files=$(find src cmd test -name '*.h' -o -name '*.cc')
fi
echo "$files" | xargs clang-format --dry-run -Werror
