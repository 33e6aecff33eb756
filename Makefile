# fsdpscope - the two commands of the README's Quick start, and their parts.
#
#   make demo   set-up, build, and the main job on the bundled reference trainer
#   make test   set-up, build, all tests (unit, end-to-end, fuzz smoke, sanitizers)

BUILD      ?= build
BUILD_SAN  ?= build-san
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
FUZZ_PERCENT ?= 100

.PHONY: all setup build build-san test test-main test-san demo clean

all: build

setup:
	@bash scripts/setup.sh

# Regular build (gcc, warnings as errors).
build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# Sanitizer build (clang, address + undefined) with the libFuzzer targets
# (FUZZ_PERCENT scales the mutations their smoke tests make).
build-san: setup
	CC=clang CXX=clang++ cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DFSS_SANITIZE=ON \
	  -DFSS_FUZZ=ON -DFSS_FUZZ_PERCENT=$(FUZZ_PERCENT) $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)

test-main: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Without the e2e scenarios labelled regular_only, whose code paths other
# scenarios take there too (tests/suite.cmake); SAN_CTEST_ARGS= runs them all.
SAN_CTEST_ARGS ?= -LE regular_only

test-san: build-san
	@echo "sanitizer build: tests labelled regular_only run in the regular build only (tests/suite.cmake)"
	cd $(BUILD_SAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS) $(SAN_CTEST_ARGS)

# Both builds' suites; ctest prints its summary line for each.
test: test-main test-san

demo: build
	@bash scripts/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_SAN)
