#!/usr/bin/env bash
# Installs the Debian packages the project needs, and the npm packages of the browser tests
# (test/browser, from its committed package-lock.json). Idempotent: apt-get runs only when a
# package is missing, npm only when the lock file changed. Used by `make test` and `make up`;
# safe to run by hand.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config g++ git ca-certificates
  clang-14 libclang-rt-14-dev clang-format clang-tidy ccache lld
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
  # MariaDB 10.11 with its client and mariadb-dump, Prometheus 2.42 and its Alertmanager,
  # libcrypt's header for the bcrypt hashes of their web config, RabbitMQ 3.10 and an AMQP
  # client for the tests (issue #26)
  mariadb-server mariadb-client prometheus prometheus-alertmanager libcrypt-dev
  rabbitmq-server amqp-tools
  # the browser the e2e tests drive headless through playwright-core (issue #14): Debian's
  # chromium (never a browser download), with fonts so that screenshots show text
  chromium fonts-liberation fonts-dejavu-core
)
# Node.js and npm run playwright-core. A machine that has them from elsewhere (NodeSource's
# nodejs ships npm; Debian's `npm` would conflict with it) keeps them.
if ! command -v node >/dev/null; then packages+=(nodejs); fi
if ! command -v npm >/dev/null; then packages+=(npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# playwright-core for the browser tests, into test/browser/node_modules (not in git), exactly
# as package-lock.json pins it; redone only when the lock file changes (its hash is kept in
# node_modules). playwright-core downloads no browser; the tests launch /usr/bin/chromium.
browser_dir="$root/test/browser"
lock_hash=$(sha256sum "$browser_dir/package-lock.json" | cut -d' ' -f1)
stamp="$browser_dir/node_modules/.klutch-lock-sha256"
if [[ ! -f "$stamp" || $(cat "$stamp") != "$lock_hash" ]]; then
  echo "install-deps: npm ci in test/browser (playwright-core)"
  # Trust the system's CA store (Debian's node knows only its built-in roots), so a machine
  # whose registry access goes through a CA installed there works without npm configuration.
  cafile=()
  if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    cafile=(--cafile=/etc/ssl/certs/ca-certificates.crt)
  fi
  (cd "$browser_dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund \
    --ignore-scripts --loglevel=error "${cafile[@]}")
  echo "$lock_hash" >"$stamp"
fi
