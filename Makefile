# The two commands: `make run` starts the switch on its embedded default,
# `make test` runs everything CI runs.
GO        ?= go
BIN       := bin
FUZZTIME  ?= 5s
BENCHTIME ?= 1s

# Every fuzz target, as package:FuzzName.
FUZZ_TARGETS := \
	./datapath/flow:FuzzExtract \
	./datapath/actions:FuzzApply \
	./netdev/vnethdr:FuzzSegment

.PHONY: all build run test vet fmt-check unit fuzz bench clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

run: build
	./$(BIN)/vswitchd

test: vet fmt-check unit fuzz

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# -race everywhere: the datapath's concurrency tests need it, and the
# packages are small enough that it costs seconds.
unit:
	$(GO) test -race -count=1 ./...

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME); \
	done

# Benchmarks of the datapath (reported, never pass/fail on timing).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./datapath/... | tee bench.out
	@scripts/benchtable.sh bench.out

clean:
	rm -rf $(BIN) bench.out
