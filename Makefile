# weft: the two commands of the README's Quickstart.
#   make demo   compile gpt-tiny and train it briefly on the shipped corpus (CPU)
#   make test   build and run every test
# Both install what they need first (scripts/install-deps.sh, as root on
# Debian 12), are idempotent, and are fast when everything is already there.

BUILD  ?= build
JOBS   ?= 2
BIN    := $(BUILD)/bin
CORPUS := $(BUILD)/data/corpus.bin

.PHONY: all deps configure build data demo test bench clean

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

clean:
	rm -rf $(BUILD)
