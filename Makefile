# weft: the two commands of the README's Quickstart.
#   make demo   compile gpt-tiny and train it briefly on the shipped corpus (CPU)
#   make test   build and run every test
#   make fuzz      libFuzzer targets (test/fuzz/), FUZZ_SECONDS each (clang)
#   make sanitize  ASan+UBSan build of everything in build-asan, then its tests
# Both install what they need first (scripts/install-deps.sh, as root on
# Debian 12), are idempotent, and are fast when everything is already there.

BUILD  ?= build
JOBS   ?= 2
BIN    := $(BUILD)/bin
CORPUS := $(BUILD)/data/corpus.bin

.PHONY: all deps configure build data demo test bench clean fuzz sanitize

all: build

deps:
	@./scripts/install-deps.sh

configure: deps
	@if [ ! -f $(BUILD)/build.ninja ]; then \
	  cmake -G Ninja -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release; \
	fi

build: configure
	@ninja -C $(BUILD) -j$(JOBS)

$(CORPUS): data/corpus.txt | build
	@mkdir -p $(dir $@)
	$(BIN)/weft-tokenize data/corpus.txt -o $@

data: build $(CORPUS)

demo: data
	@mkdir -p $(BUILD)/demo
	$(BIN)/weft-compile gpt-tiny --batch 16 --seq 64 --lr 1e-2 --schedule cosine \
	  --warmup-steps 50 --total-steps 500 --min-lr 1e-3 -o $(BUILD)/demo/gpt-tiny.weft
	$(BIN)/weft-run $(BUILD)/demo/gpt-tiny.weft --steps 500 --data $(CORPUS) \
	  --metrics $(BUILD)/demo/metrics.jsonl --save $(BUILD)/demo/checkpoint

test: data
	@cd $(BUILD) && OMP_NUM_THREADS=2 ctest --output-on-failure -j1

bench: data
	/usr/bin/python3 test/bench/bench_gpt2.py --bin $(BIN) --data $(CORPUS)

# Robustness checks (README "Fuzzing and sanitizers"); not part of `make test`.
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= program safetensors config hardware tokens checkpoint onnx
fuzz: deps
	@if [ ! -f $(FUZZ_BUILD)/build.ninja ]; then \
	  cmake -G Ninja -S test/fuzz -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DCMAKE_CXX_COMPILER=clang++; \
	fi
	@ninja -C $(FUZZ_BUILD) -j$(JOBS)
	@test/fuzz/run-fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# gcc ASan+UBSan; UBSan findings abort (-fno-sanitize-recover). MLIR's
# allocator poisons memory itself: allow_user_poisoning=0 for weft-compile;
# allocator_may_return_null=1: tests check that a 64 TiB arena is refused.
# Runs every ctest test (unit, MPI, planner and the whole lit suite with
# test/e2e's multi-rank training runs) but the Python references. Leak
# checking is off (Open MPI and OpenBLAS keep allocations until exit).
ASAN_BUILD ?= build-asan
SAN_FLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=all \
              -fno-omit-frame-pointer
SAN_ENV    := ASAN_OPTIONS=allow_user_poisoning=0:allocator_may_return_null=1:detect_leaks=0:abort_on_error=1 \
              UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OMP_NUM_THREADS=2
sanitize: deps
	@if [ ! -f $(ASAN_BUILD)/build.ninja ]; then \
	  cmake -G Ninja -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DCMAKE_C_FLAGS="$(SAN_FLAGS)" -DCMAKE_CXX_FLAGS="$(SAN_FLAGS)" \
	    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
	    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1"; \
	fi
	@$(SAN_ENV) ninja -C $(ASAN_BUILD) -j$(JOBS)
	@cd $(ASAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j1 \
	  -E '^(torch_reference|hf_reference)$$'

clean:
	rm -rf $(BUILD)
