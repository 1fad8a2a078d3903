# topo.sh - the veth topology of ../shared/bench/veth-bench.sh under names
# of its own (ofb-*), so it never collides with a harness run. Sourced
# after lib.sh.
#
#   ofb-ns1:ofb-v1 <--veth--> ofb-p1 [ switch in ofb-sut ] ofb-p2 <--veth--> ofb-v2:ofb-ns2
#
# Traffic stays in 198.18.0.0/15 inside these namespaces; frames go to a MAC
# nobody owns, so ofb-ns2 drops them right after counting them.
TNS1=ofb-ns1 TNS2=ofb-ns2 TSUT=ofb-sut
TP1=ofb-p1 TP2=ofb-p2 TV1=ofb-v1 TV2=ofb-v2
TMAC1=02:00:c6:12:01:01 TMAC2=02:00:c6:12:01:02 TSINK=02:00:c6:12:01:fe
TIP1=198.19.255.1 TIP2=198.19.255.2

topo_up() {
    ofb_add_ns $TNS1; ofb_add_ns $TNS2; ofb_add_ns $TSUT
    ip link add $TP1 netns $TSUT type veth peer name $TV1 netns $TNS1 || die "veth $TP1"
    ip link add $TP2 netns $TSUT type veth peer name $TV2 netns $TNS2 || die "veth $TP2"
    local p ns dev mac ip t
    for p in $TP1 $TP2; do
        ip netns exec $TSUT sysctl -qw net.ipv6.conf.$p.disable_ipv6=1
        ip netns exec $TSUT ip link set $p up
    done
    for t in "$TNS1 $TV1 $TMAC1 $TIP1" "$TNS2 $TV2 $TMAC2 $TIP2"; do
        read -r ns dev mac ip <<<"$t"
        ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
        ip netns exec $ns ip link set lo up
        ip netns exec $ns ip link set $dev address $mac
        ip netns exec $ns ip addr add $ip/24 dev $dev
        ip netns exec $ns ethtool -K $dev tx off >/dev/null 2>&1
        ip netns exec $ns ip link set $dev up
    done
    sleep 0.5
}

topo_down() {
    local ns keep=() n
    for ns in $TNS1 $TNS2 $TSUT; do ip netns del "$ns" 2>/dev/null; done
    for n in "${OFB_NS[@]}"; do case "$n" in $TNS1|$TNS2|$TSUT) ;; *) keep+=("$n") ;; esac; done
    OFB_NS=("${keep[@]}")
}

# rx packets of ofb-v2 (in ofb-ns2)
rx_v2() { ip netns exec $TNS2 awk -v d="$TV2:" '{ sub(/^ */, "") } index($0, d) == 1 { split($0, x, /[: ]+/); print x[3] }' /proc/net/dev; }
