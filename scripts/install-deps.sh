#!/usr/bin/env bash
# Installs the Debian packages the project needs. Idempotent: apt-get runs only when a package
# is missing. Used by `make test` and `make up`; safe to run by hand.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config g++ git ca-certificates
  clang-14 libclang-rt-14-dev clang-format clang-tidy ccache
  # libraries (Boost 1.81 only; never libboost-dev 1.74, it conflicts)
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libboost-system1.81-dev
  libssl-dev nlohmann-json3-dev libyaml-dev libsqlite3-dev libre2-dev
  libcli11-dev libspdlog-dev libfmt-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # tools the tests drive
  openssl sqlite3 curl procps tzdata
  # the OIDC provider the authentication tests log in with (issue #5)
  glewlwyd rnbyc
  # the data services `klutch broker` runs and administers (issue #13): PostgreSQL 15 with its
  # client library and tools (pg_dump, pg_restore, pg_basebackup, psql), Redis 7
  postgresql-15 postgresql-client-15 libpq-dev redis-server redis-tools
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
