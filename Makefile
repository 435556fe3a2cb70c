# Tern's front door. `make test` and `make demo` each do all the set-up they
# need on a fresh Debian 12 machine (dependencies, configure, build), then run.
PRESET ?= release
BUILD  := build/$(PRESET)
TERN   := $(BUILD)/bin/tern

.PHONY: all deps configure build test demo asan fuzz format clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET)

test: build
	@ctest --preset $(PRESET)

demo: build
	@bash scripts/demo.sh $(TERN)

# Every test under AddressSanitizer + UBSan (CI runs this too).
asan:
	@$(MAKE) --no-print-directory test PRESET=asan-ubsan

# libFuzzer targets (clang, ASan + UBSan), each for FUZZ_SECONDS, or for FUZZ_RUNS
# inputs from a fixed seed (CI) (fuzz/README.md).
FUZZ_SECONDS ?= 60
fuzz: deps
	@FUZZ_RUNS=$(FUZZ_RUNS) bash fuzz/run.sh $(FUZZ_SECONDS)

format:
	@clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf build
