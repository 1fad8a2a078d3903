# The commands: `make run` starts the switch on its embedded default,
# `make test` runs everything CI runs, `make test-unit` the quick part that
# needs neither root nor any tool (a few minutes on a laptop).
GO        ?= go
BIN       := bin
# An execution count, not a duration: Go 1.26's fuzz coordinator can report
# a spurious "context deadline exceeded" when a duration runs out on a busy
# machine (golang/go#75804, fixed in 1.27); a count has no deadline to race.
FUZZTIME  ?= 50000x
BENCHTIME ?= 1s

# The fault soak: how long it injects faults, and the invariant classes
# that are reported but do not fail it (known open defects; see
# docs/reliability.md). SOAK_SEED=N replays a run.
SOAK       ?= 10m
SOAK_KNOWN ?=

.PHONY: all build run demo demo-overlay demo-ovn test test-all test-unit vet lint fmt-check unit e2e fuzz soak soak-ci bench bench-datapath bench-veth clean

all: build

# The commands, and the benchmark harnesses (bench/portfwd, the veth
# benchmark's switch under test; bench/vhostbench), which live outside cmd/
# so that `go install ./cmd/...` installs only what a user runs.
build:
	$(GO) build -o $(BIN)/ ./cmd/... ./bench/portfwd ./bench/vhostbench

# The daemon in the foreground on its embedded default: state in ./state,
# bridge br0 (fail mode standalone), metrics on 127.0.0.1:9477. Configure
# it from another shell with bin/vsctl (same directory, or set
# VSWITCHD_STATE_DIR).
run: build
	./$(BIN)/vswitchd

# The five-minute tour: two namespaces, one bridge, ping, flows, metrics.
demo: build
	BIN=$(BIN) scripts/demo.sh

# Three hosts (namespaces, one vswitchd each) over a VXLAN overlay, two
# tenants isolated by VNI, flow-based tunnels set up with vsctl.
demo-overlay: build
	BIN=$(BIN) scripts/demo-overlay.sh

# OVN central and three chassis (namespaces: an ovsdb-server, this switch
# as ovs-vswitchd, Debian's ovn-controller each) over Geneve; a logical
# switch across them, a router (ARP, TTL), stateful and reject ACLs, a
# load balancer, DHCP from ovn-controller, a kill -9, a provider network
# and NAT on a distributed gateway port, each checked with traffic.
demo-ovn: build
	BIN=$(BIN) scripts/demo-ovn.sh

# Everything, then its total duration (also when it fails). End-to-end
# tests that lack root or a tool skip with the reason unless VSWITCH_E2E=1
# (.ci/run sets it), which makes them fail instead.
test:
	@start=$$(date +%s); rc=0; \
	$(MAKE) --no-print-directory test-all || rc=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s in total, exit $$rc"; \
	exit $$rc

test-all: vet lint fmt-check unit e2e fuzz soak-ci

# The quick part: every package's unit tests, end-to-end tests skipped
# (-short makes nstest.RequireRoot skip), property tests shortened. No root
# needed; -race is left to make test.
test-unit:
	$(GO) test -short -count=1 -p 2 ./...

vet:
	$(GO) vet ./...

# staticcheck at the version go.mod's tool directive pins (fetched through
# the module proxy like any dependency; `go get -tool
# honnef.co/go/tools/cmd/staticcheck@vX` moves it), with its default checks.
lint:
	$(GO) tool staticcheck ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The packages with end-to-end tests: those whose tests build namespaces
# or need root (found by what they call, so a new one is never forgotten).
# They run real switches, iperf3 and testpmd, and two of them at once would
# fight over the machine's two cores: one package at a time. The other
# packages run two at a time. -race everywhere: the datapath's concurrency
# tests need it.
E2E_PKGS = $(sort $(dir $(shell grep -rlE --include='*_test.go' 'nstest\.(RequireRoot|NewNetns|TwoHosts|NewSwitch|CrossConnect|IperfTCP)' .)))
unit:
	$(GO) test -race -count=1 -p 2 $(filter-out $(shell $(GO) list $(E2E_PKGS)),$(shell $(GO) list ./...))

e2e:
	$(GO) test -race -count=1 -p 1 $(E2E_PKGS)

# Every fuzz target in the tree (found by name, so a new one is never
# forgotten), each run briefly.
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "fuzz $$(dirname $$f) $$name ($(FUZZTIME))"; \
			$(GO) test ./$$(dirname $$f) -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME); \
		done; \
	done

# The fault soak (e2e/soak_test.go): ping through the switch while config
# changes, flow churn, controller flaps, interfaces recreated, a full state
# disk and kill -9 come at random; every acknowledged change must read
# back, traffic come back within 15 s, nothing leak. Needs root. The step
# loop stops after SOAK; -timeout is only a backstop for a hung step (each
# is bounded well below it), so that cleanups still run.
soak: build
	VSWITCH_E2E_BIN=$(CURDIR)/$(BIN) VSWITCH_SOAK=$(SOAK) SOAK_KNOWN=$(SOAK_KNOWN) \
		$(GO) test -count=1 -v -run '^TestSoak$$' -timeout 3h ./e2e/

# What CI runs: a one-minute soak, with no class known.
soak-ci:
	$(MAKE) soak SOAK=60s

# Benchmarks (reported, never pass/fail on timing): the datapath's own
# (ring/null ports, one process) and the side-by-side veth benchmark.
bench: bench-datapath bench-veth

bench-datapath:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./datapath/... | tee bench.out
	@scripts/benchtable.sh bench.out

# The team's veth harness: this switch (AF_XDP and AF_PACKET ports, busy
# polling and default sleeping) beside Open vSwitch, the Linux bridge and a
# bare veth pair. Needs root, trafgen, gcc and openvswitch-switch; override
# VETH_SUTS, REPS, FLOWS, ... as the harness documents.
VETH_BENCH ?= ../shared/bench/veth-bench.sh
VETH_SUTS ?= direct linuxbridge ovs ovs-afxdp \
	"cmd:vs-afxdp=$(CURDIR)/$(BIN)/portfwd --driver afxdp --pmd-sleep-max 0" \
	"cmd:vs-afxdp-sleep=$(CURDIR)/$(BIN)/portfwd --driver afxdp" \
	"cmd:vs-afpacket=$(CURDIR)/$(BIN)/portfwd --driver afpacket --pmd-sleep-max 0"
bench-veth: build
	@if [ -f $(VETH_BENCH) ]; then \
		OUTDIR=$(CURDIR)/bench-results/$$(date +%Y%m%d-%H%M%S) bash $(VETH_BENCH) $(VETH_SUTS); \
	else echo "no $(VETH_BENCH): skipping the veth benchmark"; fi

clean:
	rm -rf $(BIN) bench.out
