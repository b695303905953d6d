# The two commands of the README, plus the ones developers use while iterating.
#   make test   install Debian packages (idempotent), configure, build, run every test and
#               every fuzzer for a bounded time
#   make up     build and start the local Klutch sandbox (see README)

DATA_DIR ?= $(CURDIR)/.data

.PHONY: test up deps configure build fast bench fuzz format check-format clean

deps:
	./scripts/install-deps.sh

configure: deps
	cmake --preset dev

build: configure
	cmake --build --preset dev

# make test also builds the libFuzzer targets (clang) and runs each for a bounded time.
TEST_FUZZ_SECONDS ?= 10

test: build
	ctest --preset dev
	$(MAKE) fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS)

fast: build
	ctest --preset fast

up: build
	./build/bin/klutch up --state-dir $(DATA_DIR)

bench: build
	./build/bin/klutch-bench-apiserver
	./build/bin/klutch-bench-informer
	./build/bin/klutch-bench-cel
	./build/bin/klutch-bench-access
	./build/bin/klutch-bench-rbac
	./build/bin/klutch-bench-konnector
	./build/bin/klutch-bench-manager
	./build/bin/klutch-bench-broker
	./build/bin/klutch-bench-a8s
	./build/bin/klutch-bench-services
	./build/bin/klutch-bench-bind

FUZZ_SECONDS ?= 30

fuzz: deps
	cmake --preset fuzz && cmake --build --preset fuzz --target fuzzers
	./scripts/run-fuzzers.sh build-fuzz/fuzz $(FUZZ_SECONDS)

format:
	git ls-files '*.h' '*.cc' | xargs clang-format -i

check-format:
	./scripts/check-format.sh

clean:
	rm -rf build build-debug build-asan build-fuzz
