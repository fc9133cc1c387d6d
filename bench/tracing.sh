#!/usr/bin/env bash
# Tracing benchmark: bulk throughput of bpf_dctcp between two namespaces with
# tracing off, per window and per ACK, measured side by side in one run
# (modes interleaved over ROUNDS rounds), plus events per second delivered
# and dropped. Prints ratios against tracing off.
set -euo pipefail

LOADER=${LOADER:-target/release/loader}
SECS=${SECS:-4}
ROUNDS=${ROUNDS:-5}
NAME=t_bench
A=dlbench-a B=dlbench-b
OUT=$(mktemp -d)

ALLOWED=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
cleanup() {
    sysctl -qw net.ipv4.tcp_allowed_congestion_control="$ALLOWED" 2>/dev/null || true
    pkill -f "iperf3 -s -p 5299" 2>/dev/null || true
    ip netns del $A 2>/dev/null || true
    ip netns del $B 2>/dev/null || true
    $LOADER detach $NAME >/dev/null 2>&1 || true
    rm -rf "$OUT"
}
trap cleanup EXIT INT TERM

[ "$(id -u)" -eq 0 ] || { echo "bench needs root (sudo just bench)" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "iperf3 missing: run ./setup.sh" >&2; exit 1; }

$LOADER attach --algo dctcp --name $NAME >/dev/null
# A namespace may default to an algorithm only if it is "allowed" (non-restricted).
sysctl -qw net.ipv4.tcp_allowed_congestion_control="$ALLOWED $NAME"
ip netns add $A
ip netns add $B
ip link add dlbencha netns $A type veth peer name dlbenchb netns $B
ip -n $A addr add 198.18.250.1/24 dev dlbencha
ip -n $B addr add 198.18.250.2/24 dev dlbenchb
for ns in $A $B; do
    ip -n $ns link set lo up
    ip netns exec $ns sysctl -qw net.ipv4.tcp_ecn=1 net.ipv4.tcp_congestion_control=$NAME
done
ip -n $A link set dlbencha up
ip -n $B link set dlbenchb up
# A packet per segment and an ACK per two: the ACK rate per-ACK tracing pays for.
for pair in "$A dlbencha" "$B dlbenchb"; do
    set -- $pair
    ip netns exec $1 ethtool -K $2 tso off gso off gro off >/dev/null 2>&1 || true
done
ip netns exec $B iperf3 -s -p 5299 -D

run_mode() { # mode -> prints "gbps seen dropped produced"
    local mode=$1 tr=()
    case $mode in
        off) ;;
        window) tr=(--duration $((SECS + 2))) ;;
        ack) tr=(--per-ack --duration $((SECS + 2))) ;;
    esac
    local pid=""
    if [ "$mode" != off ]; then
        $LOADER trace --algo $NAME "${tr[@]}" -o /dev/null 2>"$OUT/trace.err" &
        pid=$!
        sleep 0.5
    fi
    ip netns exec $A iperf3 -c 198.18.250.2 -p 5299 -C $NAME -t $SECS -J >"$OUT/iperf.json"
    local gbps
    gbps=$(python3 -c "import json;print(json.load(open('$OUT/iperf.json'))['end']['sum_received']['bits_per_second']/1e9)")
    if [ -n "$pid" ]; then
        kill -INT $pid; wait $pid || true
        # "<name>: S events seen, D dropped (ring full), P produced; ..."
        read -r seen dropped produced < <(grep 'events seen' "$OUT/trace.err" |
            sed -E 's/.*: ([0-9]+) events seen, ([0-9]+) dropped.*, ([0-9]+) produced.*/\1 \2 \3/')
        echo "$gbps $seen $dropped $produced"
    else
        echo "$gbps 0 0 0"
    fi
}

for r in $(seq "$ROUNDS"); do
    for m in off window ack; do
        read -r g s d p < <(run_mode $m)
        echo "round $r/$ROUNDS $m: $g Gbit/s, events seen $s dropped $d produced $p" >&2
        echo "$m $g $s $d $p" >>"$OUT/rounds"
    done
done

python3 - "$ROUNDS" "$SECS" "$OUT/rounds" <<'PY'
import statistics, sys
r, secs = int(sys.argv[1]), float(sys.argv[2])
rows = [l.split() for l in open(sys.argv[3])]
g = {m: [float(x[1]) for x in rows if x[0] == m] for m in ("off", "window", "ack")}
ev = {m: [sum(int(x[i]) for x in rows if x[0] == m) for i in (2, 3, 4)] for m in ("window", "ack")}
med = {m: statistics.median(v) for m, v in g.items()}
print(f"tracing benchmark: bpf_dctcp bulk over veth (no offloads), {r} rounds x {secs:.0f} s per mode, interleaved")
for m, label in (("off", "off"), ("window", "per-window"), ("ack", "per-ACK")):
    spread = f"{min(g[m]):.2f}-{max(g[m]):.2f}"
    ratio = "" if m == "off" else f", {med[m]/med['off']:.3f} x off (cost {100*(1-med[m]/med['off']):+.1f} %)"
    print(f"  {label:<10} median {med[m]:.2f} Gbit/s (rounds {spread}){ratio}")
noise = 100 * (max(g["off"]) - min(g["off"])) / med["off"]
print(f"  noise floor: tracing off varies by {noise:.0f} % between rounds; costs below that are not resolved")
for m, label in (("window", "per-window"), ("ack", "per-ACK")):
    s, d, p = ev[m]
    print(f"  {label:<10} events seen {s}, dropped {d}, produced {p} (seen+dropped=produced: {s + d == p}); "
          f"{s/(r*secs)/1e6:.2f} M events/s delivered over the transfers, {d/(r*secs):.0f}/s dropped")
print("  targets: per-window cost <= 1 %, per-ACK cost <= 5 %, per-ACK >= 1 M events/s without loss")
PY
