# lib.sh - helpers shared by the OpenFlow-agent benchmarks in this folder.
# Sourced, not run. Everything a script starts is recorded (PID = process
# group leader) and stopped by ofb_cleanup, which the scripts run from an
# EXIT trap; namespaces and links they create are deleted the same way.
#
# OVS userspace is started the way ../shared/bench/veth-bench.sh does it:
# ovsdb-server + ovs-vswitchd with private OVS_RUNDIR/OVS_DBDIR/OVS_LOGDIR/
# OVS_SYSCONFDIR under a temp dir, in a network namespace of its own
# (every userspace OVS creates a tap named "ovs-netdev" in its netns).

OFB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=${REPO:-$(cd "$OFB_DIR/../.." && pwd)}
BIN=${BIN:-$REPO/bin}

OFB_STARTED=()   # PIDs (process-group leaders) started here
OFB_NS=()        # namespaces created here
OFB_LINKS=()     # root-ns links created here
OFB_WORK=""      # temp dir, removed at cleanup

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

ofb_work() { [ -n "$OFB_WORK" ] || OFB_WORK=$(mktemp -d /tmp/ofbench.XXXXXX); }

# ofb_bg LOG CMD...: CMD in its own session; its PID (= PGID) in BG_PID.
# (setsid does not fork here: a non-interactive shell's background job is
# not a group leader, so BG_PID is the process that ends up exec'ing CMD.)
# With OFB_SAME_PGRP=1 (the veth-bench.sh SUT wrappers) CMD stays in the
# caller's process group, so the harness's group signals reach it too.
BG_PID=""
ofb_bg() {
    local logf=$1; shift
    if [ "${OFB_SAME_PGRP:-0}" = 1 ]; then "$@" >"$logf" 2>&1 </dev/null &
    else setsid "$@" >"$logf" 2>&1 </dev/null &
    fi
    BG_PID=$!
    OFB_STARTED+=("$BG_PID")
}

# ofb_stop PID [SIG]: signal PID's process group, wait up to 5 s, then KILL.
ofb_stop() {
    local pid=$1 sig=${2:-TERM} i p keep=()
    [ -n "$pid" ] || return 0
    if kill -0 "$pid" 2>/dev/null; then
        if [ "${OFB_SAME_PGRP:-0}" = 1 ]; then kill -"$sig" "$pid" 2>/dev/null
        else kill -"$sig" -- -"$pid" 2>/dev/null || kill -"$sig" "$pid" 2>/dev/null
        fi
        for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && { kill -KILL -- -"$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null; }
        [ "${OFB_SAME_PGRP:-0}" = 1 ] && kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
    for p in "${OFB_STARTED[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
    OFB_STARTED=("${keep[@]}")
    return 0
}

ofb_add_ns() {
    ip netns list | awk '{print $1}' | grep -qx "$1" && die "netns $1 already exists (stale run? delete it first)"
    ip netns add "$1" || die "cannot create netns $1"
    OFB_NS+=("$1")
}

ofb_cleanup() {
    local p ns l
    for p in "${OFB_STARTED[@]}"; do ofb_stop "$p"; done
    for ns in "${OFB_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
    OFB_NS=()
    for l in "${OFB_LINKS[@]}"; do ip link show "$l" >/dev/null 2>&1 && ip link del "$l" 2>/dev/null; done
    OFB_LINKS=()
    [ -n "$OFB_WORK" ] && rm -rf "$OFB_WORK"
    OFB_WORK=""
    return 0
}

# in_ns NS CMD...: CMD in netns NS ("" = here)
in_ns() { local ns=$1; shift; if [ -n "$ns" ]; then ip netns exec "$ns" "$@"; else "$@"; fi; }

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# ---------------------------------------------------------------- rule files
# rule I (0-based) matches nw_dst = 198.(18+I/65536).(I/256%256).(I%256)
ofb_ip() { local i=$1; echo "198.$((18 + i / 65536)).$((i / 256 % 256)).$((i % 256))"; }

# gen_dst_rules FILE N [EXTRA_MATCH]: N distinct nw_dst rules in table 0
gen_dst_rules() {
    local f=$1 n=$2 extra=${3:-}
    awk -v n="$n" -v extra="$extra" 'BEGIN {
        for (i = 0; i < n; i++)
            printf "table=0,priority=100,%sip,nw_dst=198.%d.%d.%d,actions=output:2\n",
                extra, 18 + int(i / 65536), int(i / 256) % 256, i % 256 }' >"$f"
}

# gen_fwd_rules FILE N TABLES: N rules in_port=1,udp,tp_src=1024+i ->
# output:2 in table TABLES-1, a goto_table chain in_port=1,ip in tables
# 0..TABLES-2, a catch-all in_port=1 -> 2 at priority 1 in the last table
# (latency/connectivity probes) and, last of all, in_port=2 -> 1 in table 0:
# the reverse path works only once every other rule is in, so the harness's
# connectivity check also waits for the whole rule set.
gen_fwd_rules() {
    local f=$1 n=$2 t=$3
    awk -v n="$n" -v t="$t" 'BEGIN {
        last = t - 1
        for (i = 0; i < n; i++)
            printf "table=%d,priority=100,in_port=1,udp,tp_src=%d,actions=output:2\n", last, 1024 + i
        printf "table=%d,priority=1,in_port=1,actions=output:2\n", last
        for (k = last - 1; k >= 0; k--)
            printf "table=%d,priority=10,in_port=1,ip,actions=goto_table:%d\n", k, k + 1
        printf "table=0,priority=10,in_port=2,actions=output:1\n" }' >"$f"
}

# ---------------------------------------------------------------- our switch
# ours_up DIR NS [PTYPE P1 P2]: vswitchd with state in DIR, in netns NS
# ("" = here), bridge br0 in fail mode secure; with PTYPE, ports P1 (ofport
# 1) and P2 (ofport 2) of that type, one busy-polling PMD on CPU1.
# Sets OURS_PID; the OpenFlow socket is unix:DIR/br0.mgmt.
OURS_PID="" OURS_DIR=""
ours_up() {
    local dir=$1 ns=$2 ptype=${3:-} p1=${4:-} p2=${5:-} pfx=() i
    OURS_DIR=$dir; mkdir -p "$dir"
    [ -n "$ns" ] && pfx=(ip netns exec "$ns")
    [ -n "${SUT_CPU:-}" ] && pfx+=(taskset -c "$SUT_CPU")
    # Without OVS's environment: an OVS_RUNDIR left exported by ovs_up
    # would put the daemon in Open vSwitch mode, its sockets in that dir.
    ofb_bg "$dir/vswitchd.log" "${pfx[@]}" env -u OVS_RUNDIR -u OVS_DBDIR -u OVS_LOGDIR -u OVS_SYSCONFDIR \
        "$BIN/vswitchd" --state-dir "$dir" --metrics-addr '' \
        --default-bridge br0 --log-level "${OURS_LOG_LEVEL:-warn}"
    OURS_PID=$BG_PID
    for i in $(seq 1 100); do [ -S "$dir/br0.mgmt" ] && break; sleep 0.05; done
    [ -S "$dir/br0.mgmt" ] || { log "vswitchd did not start: $(tail -5 "$dir/vswitchd.log")"; return 1; }
    "$BIN/vsctl" --state-dir "$dir" set-fail-mode br0 secure || return 1
    if [ -n "$ptype" ]; then
        "$BIN/vsctl" --state-dir "$dir" set Open_vSwitch . other_config:pmd-sleep-max=0 other_config:pmd-cpu-mask=0x2 || return 1
        "$BIN/vsctl" --state-dir "$dir" add-port br0 "$p1" -- type="$ptype" ofport_request=1 || return 1
        "$BIN/vsctl" --state-dir "$dir" add-port br0 "$p2" -- type="$ptype" ofport_request=2 || return 1
    fi
    return 0
}
ours_vsctl() { "$BIN/vsctl" --state-dir "$OURS_DIR" "$@"; }
ours_down() { ofb_stop "$OURS_PID"; OURS_PID=""; }

# ---------------------------------------------------------------- OVS
# ovs_up DIR NS [PTYPE P1 P2]: ovsdb-server + ovs-vswitchd (OVS userspace,
# datapath_type=netdev) with private dirs under DIR, in netns NS, bridge br0
# fail-mode secure; with PTYPE (afxdp|system) ports P1 (ofport 1), P2 (2),
# PMD mask 0x2. Sets OVS_PID (ovs-vswitchd) and exports OVS_RUNDIR etc., so
# ovs-vsctl/ovs-ofctl/ovs-appctl find this instance. OVS_VSWITCHD names
# another build of the daemon (OVS-DPDK's, by path) and OVS_OTHER_CONFIG
# (array) other_config keys to set before it starts.
OVS_PID="" OVSDB_PID="" OVS_NS=""
ovs_env() {
    export OVS_RUNDIR=$1/run OVS_DBDIR=$1/db OVS_LOGDIR=$1/log OVS_SYSCONFDIR=$1/etc
}
ovs_vsctl() { in_ns "$OVS_NS" ovs-vsctl --timeout=20 "$@"; }
ovs_appctl() { ovs-appctl -t "$OVS_RUNDIR/ovs-vswitchd.ctl" --timeout=20 "$@"; }
ovs_up() {
    local dir=$1 ns=$2 ptype=${3:-} p1=${4:-} p2=${5:-} pfx=() i
    OVS_NS=$ns
    mkdir -p "$dir"/{run,db,log,etc}; ovs_env "$dir"
    [ -n "$ns" ] && pfx=(ip netns exec "$ns")
    [ -n "${SUT_CPU:-}" ] && pfx+=(taskset -c "$SUT_CPU")
    ovsdb-tool create "$OVS_DBDIR/conf.db" /usr/share/openvswitch/vswitch.ovsschema || return 1
    ofb_bg "$OVS_LOGDIR/ovsdb-server.out" "${pfx[@]}" ovsdb-server "$OVS_DBDIR/conf.db" \
        --remote=punix:"$OVS_RUNDIR/db.sock" --pidfile="$OVS_RUNDIR/ovsdb-server.pid" \
        --unixctl="$OVS_RUNDIR/ovsdb-server.ctl" --log-file="$OVS_LOGDIR/ovsdb-server.log" --no-chdir
    OVSDB_PID=$BG_PID
    for i in $(seq 1 50); do [ -S "$OVS_RUNDIR/db.sock" ] && break; sleep 0.1; done
    ovs_vsctl --no-wait init || return 1
    ovs_vsctl --no-wait set Open_vSwitch . other_config:tx-flush-interval=0
    [ -n "$ptype" ] && ovs_vsctl --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x2
    # OVS_OTHER_CONFIG (an array of key=value) is set before the daemon
    # reads it: dpdk-init and dpdk-extra take effect only at start.
    [ -n "${OVS_OTHER_CONFIG+x}" ] && [ "${#OVS_OTHER_CONFIG[@]}" -gt 0 ] &&
        ovs_vsctl --no-wait set Open_vSwitch . "${OVS_OTHER_CONFIG[@]/#/other_config:}"
    ofb_bg "$OVS_LOGDIR/ovs-vswitchd.out" "${pfx[@]}" "${OVS_VSWITCHD:-ovs-vswitchd}" unix:"$OVS_RUNDIR/db.sock" \
        --pidfile="$OVS_RUNDIR/ovs-vswitchd.pid" --unixctl="$OVS_RUNDIR/ovs-vswitchd.ctl" \
        --log-file="$OVS_LOGDIR/ovs-vswitchd.log" --no-chdir --disable-system-route -vconsole:off
    OVS_PID=$BG_PID
    for i in $(seq 1 100); do [ -S "$OVS_RUNDIR/ovs-vswitchd.ctl" ] && break; sleep 0.1; done
    ovs_vsctl add-br br0 -- set bridge br0 datapath_type=netdev fail-mode=secure \
        other_config:hwaddr=02:00:c6:12:00:b0 || return 1
    if [ -n "$ptype" ]; then
        local opt=()
        [ "$ptype" = afxdp ] && opt=(type=afxdp options:xdp-mode=best-effort)
        ovs_vsctl add-port br0 "$p1" -- set Interface "$p1" "${opt[@]}" ofport_request=1 || return 1
        ovs_vsctl add-port br0 "$p2" -- set Interface "$p2" "${opt[@]}" ofport_request=2 || return 1
        for i in "$p1" "$p2"; do
            local err; err=$(ovs_vsctl get Interface "$i" error 2>/dev/null)
            [ -n "$err" ] && [ "$err" != "[]" ] && { log "OVS interface $i: $err"; return 1; }
        done
    fi
    ovs-ofctl del-flows br0
    return 0
}
ovs_down() {
    [ -n "$OVS_PID" ] && kill -0 "$OVS_PID" 2>/dev/null && ovs_appctl exit --cleanup >/dev/null 2>&1
    ofb_stop "$OVS_PID"; OVS_PID=""
    ofb_stop "$OVSDB_PID"; OVSDB_PID=""
}

# ---------------------------------------------------------------- OVS-DPDK
# ovs_dpdk_up DIR NS PREFIX: ovs_up with Debian's OVS-DPDK build (by path)
# in a new netns NS: DPDK without hugepages or PCI (--no-huge -m 2048
# --legacy-mem --no-pci, file prefix PREFIX), lcore CPU0, PMD CPU1. Ports
# come from ovs_dpdk_port. ovs_dpdk_down PREFIX stops it.
OVS_DPDK=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
ovs_dpdk_up() {
    local dir=$1 ns=$2 prefix=$3
    [ -x "$OVS_DPDK" ] || { log "no $OVS_DPDK (apt-get install openvswitch-switch-dpdk)"; return 1; }
    ofb_add_ns "$ns"
    OVS_VSWITCHD=$OVS_DPDK
    OVS_OTHER_CONFIG=(dpdk-init=true "dpdk-extra=\"--no-huge -m 2048 --legacy-mem --no-pci --file-prefix $prefix\""
        dpdk-lcore-mask=0x1 pmd-cpu-mask=0x2)
    ovs_up "$dir" "$ns"
}
# ovs_dpdk_port NAME OFPORT DEVARGS: a dpdk port on a virtual device
# (e.g. net_pcap0,rx_pcap=FILE,infinite_rx=1: DPDK's pcap PMD replaying
# FILE from memory; with no tx given, what it sends is dropped and
# counted). Fails with the interface's error.
ovs_dpdk_port() {
    local err
    ovs_vsctl add-port br0 "$1" -- set Interface "$1" type=dpdk ofport_request="$2" \
        "options:dpdk-devargs=$3" || return 1
    err=$(ovs_vsctl get Interface "$1" error 2>/dev/null)
    [ -n "$err" ] && [ "$err" != "[]" ] && { log "OVS interface $1: $err (see $OVS_LOGDIR/ovs-vswitchd.log)"; return 1; }
    return 0
}
# ovs_pmd_tid: the thread id of OVS's (first) PMD thread.
ovs_pmd_tid() { grep -l '^pmd' /proc/"$OVS_PID"/task/*/comm | head -1 | cut -d/ -f5; }
ovs_dpdk_down() {
    ovs_down
    rm -rf "/run/dpdk/$1"
    unset OVS_VSWITCHD OVS_OTHER_CONFIG
}
