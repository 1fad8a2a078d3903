#!/bin/sh
# benchtable.sh FILE: turn `go test -bench` output into a markdown table of
# the metrics the datapath benchmarks report.
command -v awk >/dev/null 2>&1 || { echo "benchtable.sh needs awk (apt-get install mawk)" >&2; exit 1; }
[ -r "${1:-}" ] || { echo "usage: benchtable.sh FILE (go test -bench output)" >&2; exit 2; }
awk '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	mpps = nspkt = allocs = emc = batch = "-"
	for (i = 3; i < NF; i++) {
		if ($(i+1) == "Mpps") mpps = $i
		if ($(i+1) == "ns/pkt") nspkt = $i
		if ($(i+1) == "ns/op" && nspkt == "-") nspkt = $i
		if ($(i+1) == "allocs/op") allocs = $i
		if ($(i+1) == "%emc") emc = $i
		if ($(i+1) == "pkts/batch") batch = $i
	}
	rows[++n] = sprintf("| %s | %s | %s | %s | %s | %s |", name, mpps, nspkt, emc, batch, allocs)
}
END {
	print "| benchmark | Mpps | ns/pkt (ns/op) | EMC hit % | pkts/batch | allocs/op |"
	print "| --- | --- | --- | --- | --- | --- |"
	for (i = 1; i <= n; i++) print rows[i]
}' "$1"
