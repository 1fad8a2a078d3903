#!/usr/bin/env bash
# breakdown.sh - where the microseconds of a switched round trip go.
#
#   ns1:v1 198.18.0.1 <-veth-> p1 [ SUT in netns sut ] p2 <-veth-> v2 198.18.0.2 :ns2
#
# A UDP ping-pong (bench/latency/pingprobe, one probe in flight, blocking
# sockets, LAT_I µs apart, like veth-bench's hb-pingpong) runs through each
# variant; the probes carry the datapath's probe marker, so bench/portfwd
# (run with -latency-probe 1) times every probed batch per stage:
#   sender->pmd  the client's send call -> the PMD's clock read that saw it
#   poll-gap     the PMD's previous look at its queues -> this one
#   rx / process / send / pmd-total   inside the PMD (send includes the kick)
# and the kernel side around it: /proc/softirqs NET_RX per CPU, ksoftirqd
# CPU time, the PMD thread's schedstat (run-queue wait) and the AF_XDP
# sockets' XDP_STATISTICS.
#
# Usage: sudo bench/latency/breakdown.sh [VARIANT ...]
#   bridge      Linux bridge in the SUT netns (the reference)
#   busy        portfwd, afxdp, busy-polling PMD (pmd-sleep-max 0)
#   sleep       portfwd, afxdp, default sleeping PMD
#   afpacket    portfwd, afpacket, default sleeping PMD
#   NAME=FLAGS  portfwd with FLAGS (e.g. "bp=-driver afxdp -pmd-sleep-max 0 -afxdp-busy-poll 20");
#               FLAGS may start with "bin:PATH " to run another portfwd build
#               (before/after comparisons; it must have -latency-probe)
# Default: bridge busy sleep.  Knobs: REPS [3] (interleaved rounds), LAT_N
# [3000], LAT_I [200], SUT_CPU [1], CLI_CPU [0], OUT [a mktemp dir].
# Output: one line per run, then the median over REPS of each figure per
# variant (in µs), and the ratios to the bridge.
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
REPS=${REPS:-3} LAT_N=${LAT_N:-3000} LAT_I=${LAT_I:-200}
SUT_CPU=${SUT_CPU:-1} CLI_CPU=${CLI_CPU:-0}
OUT=${OUT:-$(mktemp -d /tmp/breakdown.XXXXXX)}
S=$(printf %04x $((RANDOM)))
NS1=lbn1$S NS2=lbn2$S NSS=lbns$S
P1=lbp1$S P2=lbp2$S V1=lbv1$S V2=lbv2$S BR=lbbr$S
IP1=198.18.0.1 IP2=198.18.0.2 PORT=7
PIDS=()

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
stop() { # PID: SIGTERM its process group, then KILL
    local p=$1 i
    kill -TERM -- -"$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
    for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- -"$p" 2>/dev/null
    wait "$p" 2>/dev/null
}
topo_down() {
    local p
    for p in "${PIDS[@]}"; do stop "$p"; done
    PIDS=()
    for n in $NS1 $NS2 $NSS; do ip netns del "$n" 2>/dev/null; done
    ip link del $P1 2>/dev/null; ip link del $P2 2>/dev/null
}
trap 'topo_down' EXIT
trap 'exit 1' INT TERM

topo_up() {
    ip netns add $NS1 && ip netns add $NS2 && ip netns add $NSS || return 1
    ip link add $P1 type veth peer name $V1 && ip link add $P2 type veth peer name $V2 || return 1
    ip link set $V1 netns $NS1; ip link set $V2 netns $NS2
    ip link set $P1 netns $NSS; ip link set $P2 netns $NSS
    ip -n $NS1 addr add $IP1/24 dev $V1; ip -n $NS2 addr add $IP2/24 dev $V2
    for x in "$NS1 $V1" "$NS2 $V2"; do
        set -- $x
        ip -n "$1" link set lo up; ip -n "$1" link set "$2" up
        ip netns exec "$1" ethtool -K "$2" tx off >/dev/null 2>&1
    done
    ip -n $NS1 neigh replace $IP2 lladdr "$(ip -n $NS2 -br link show $V2 | awk '{print $3}')" dev $V1 nud permanent
    ip -n $NS2 neigh replace $IP1 lladdr "$(ip -n $NS1 -br link show $V1 | awk '{print $3}')" dev $V2 nud permanent
    ip -n $NSS link set $P1 up; ip -n $NSS link set $P2 up
}

# softirq NET_RX per CPU and ksoftirqd/N utime+stime (ticks), one line
kstate() {
    local rx k
    rx=$(awk '/NET_RX/ {print $2, $3}' /proc/softirqs)
    k=""
    for c in 0 1; do
        local pid; pid=$(pgrep -x "ksoftirqd/$c" | head -1)
        k="$k $(awk '{print $14+$15}' /proc/$pid/stat 2>/dev/null || echo 0)"
    done
    echo "$rx$k"
}

run_one() { # NAME FLAGS|bridge ROUND
    local name=$1 flags=$2 r=$3
    local log=$OUT/$name.$r.log
    topo_up || { log "topology failed"; topo_down; return 1; }
    if [ "$flags" = bridge ]; then
        ip -n $NSS link add $BR type bridge && ip -n $NSS link set $P1 master $BR && ip -n $NSS link set $P2 master $BR
        ip -n $NSS link set $BR up
    else
        local pf=$BIN/portfwd
        case $flags in bin:*) pf=${flags%% *}; pf=${pf#bin:}; flags=${flags#* } ;; esac
        # shellcheck disable=SC2086
        setsid ip netns exec $NSS taskset -c "$SUT_CPU" "$pf" -latency-probe 1 $flags $P1 $P2 >"$log" 2>&1 </dev/null &
        PIDS+=($!)
    fi
    setsid ip netns exec $NS2 taskset -c "$CLI_CPU" "$BIN/pingprobe" server $IP2:$PORT >/dev/null 2>&1 </dev/null &
    PIDS+=($!)
    # Wait (bounded) until a probe gets through: the SUT is up.
    local i ok=0
    for i in $(seq 50); do
        if ip netns exec $NS1 "$BIN/pingprobe" client -n 3 -i 1000 -t 100 $IP2:$PORT 2>/dev/null | grep -q 'lost [0-2]$'; then ok=1; break; fi
        sleep 0.1
    done
    [ $ok = 1 ] || { log "$name: no connectivity"; topo_down; return 1; }
    local k0 k1 res
    k0=$(kstate)
    res=$(ip netns exec $NS1 taskset -c "$CLI_CPU" "$BIN/pingprobe" client -n "$LAT_N" -i "$LAT_I" $IP2:$PORT)
    k1=$(kstate)
    topo_down # SIGTERM makes portfwd print its report
    echo "$res" >>"$log"
    echo "kstate $k0 $k1" >>"$log"
    # One result line: see HDR
    awk -v name="$name" -v r="$r" -v lat_n="$LAT_N" '
        /^rtt / { rtt50=$3; rtt99=$7; fwd50=$12; back50=$17; lost=$NF }
        /^latency pmd 0 sender->pmd:/ { s50=$8; s99=$12 }
        /^latency pmd 0 poll-gap:/ { g50=$8; g99=$12 }
        /^latency pmd 0 pmd-total:/ { t50=$8; t99=$12 }
        /^latency pmd 0 send:/ { sd50=$8 }
        /^schedstat pmd 0:/ { rq=$5/1e6; cpu=$4/1e6 }
        /^xsk / { xd += $4 + $6 }
        /^kstate / { nr0=$6-$2; nr1=$7-$3; k0=$8-$4; k1=$9-$5 }
        END { printf "%s %s %s %s %s %s %s %s %s %s %s %s %s %d %d %d %d %.2f %.0f %d %s\n", name, r, rtt50, rtt99, fwd50, back50,
              s50+0, s99+0, g50+0, g99+0, t50+0, t99+0, sd50+0, nr0/lat_n*1000, nr1/lat_n*1000, k0, k1, rq, cpu, xd, lost }' "$log"
}

[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
BIN=$OUT/bin
mkdir -p "$BIN"
(cd "$ROOT" && go build -o "$BIN/portfwd" ./bench/portfwd && go build -o "$BIN/pingprobe" ./bench/latency/pingprobe) || exit 1

[ $# -gt 0 ] || set -- bridge busy sleep
declare -A FLAGS
ORDER=()
for v in "$@"; do
    case $v in
    bridge) FLAGS[$v]=bridge ;;
    busy) FLAGS[$v]="-driver afxdp -pmd-sleep-max 0" ;;
    sleep) FLAGS[$v]="-driver afxdp" ;;
    afpacket) FLAGS[$v]="-driver afpacket" ;;
    *=*) FLAGS[${v%%=*}]=${v#*=}; v=${v%%=*} ;;
    *) echo "unknown variant $v" >&2; exit 2 ;;
    esac
    ORDER+=("$v")
done
log "results in $OUT; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "start $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >"$OUT/env.txt"
HDR="variant round rtt50 rtt99 fwd50 back50 s2pmd50 s2pmd99 gap50 gap99 pmd50 pmd99 send50 netrx0/1k netrx1/1k ksirq0 ksirq1 runq_ms pmdcpu_ms xskdrop lost"
echo "$HDR" >"$OUT/runs.txt"
for r in $(seq "$REPS"); do
    for v in "${ORDER[@]}"; do
        run_one "$v" "${FLAGS[$v]}" "$r" | tee -a "$OUT/runs.txt"
    done
done
log "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"
echo
echo "medians over $REPS rounds (µs; netrx = NET_RX softirqs per 1000 probes on CPU0/CPU1; ksirq = ksoftirqd ticks; runq = PMD run-queue wait; pmdcpu = PMD thread CPU time over the SUT's life):"
awk 'NR == 1 { print; next }
     { n[$1]++; for (i = 3; i <= NF; i++) v[$1, i, n[$1]] = $i; if (!($1 in seen)) { seen[$1] = 1; ord[++k] = $1 } ; nf = NF }
     END {
        for (j = 1; j <= k; j++) {
            name = ord[j]; line = name " med"
            for (i = 3; i <= nf; i++) {
                m = n[name]
                for (x = 1; x <= m; x++) {   # insertion sort (mawk has no asort)
                    y = v[name, i, x] + 0
                    for (z = x - 1; z >= 1 && a[z] > y; z--) a[z + 1] = a[z]
                    a[z + 1] = y
                }
                med[name, i] = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
                line = line " " med[name, i]
            }
            print line
        }
        if (("bridge", 3) in med)
            for (j = 1; j <= k; j++) if (ord[j] != "bridge")
                printf "%s / bridge: rtt p50 %.2fx, p99 %.2fx\n", ord[j], med[ord[j], 3] / med["bridge", 3], med[ord[j], 4] / med["bridge", 4]
     }' "$OUT/runs.txt" | column -t | tee "$OUT/summary.txt"
