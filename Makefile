# The two commands: `make run` starts the switch on its embedded default,
# `make test` runs everything CI runs.
GO        ?= go
BIN       := bin
FUZZTIME  ?= 5s
BENCHTIME ?= 1s

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

# Every fuzz target in the tree (found by name, so a new one is never
# forgotten), each run briefly.
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "fuzz $$(dirname $$f) $$name ($(FUZZTIME))"; \
			$(GO) test ./$$(dirname $$f) -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME); \
		done; \
	done

# Benchmarks of the datapath (reported, never pass/fail on timing).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./datapath/... | tee bench.out
	@scripts/benchtable.sh bench.out

clean:
	rm -rf $(BIN) bench.out
