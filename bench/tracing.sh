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

declare -A sum_g sum_s sum_d sum_p
for m in off window ack; do sum_g[$m]=0; sum_s[$m]=0; sum_d[$m]=0; sum_p[$m]=0; done
for r in $(seq "$ROUNDS"); do
    for m in off window ack; do
        read -r g s d p < <(run_mode $m)
        echo "round $r/$ROUNDS $m: $g Gbit/s, events seen $s dropped $d produced $p" >&2
        sum_g[$m]=$(python3 -c "print(${sum_g[$m]} + $g)")
        sum_s[$m]=$((${sum_s[$m]} + s)); sum_d[$m]=$((${sum_d[$m]} + d)); sum_p[$m]=$((${sum_p[$m]} + p))
    done
done

python3 - "$ROUNDS" "$SECS" "${sum_g[off]}" "${sum_g[window]}" "${sum_g[ack]}" \
    "${sum_s[window]}" "${sum_d[window]}" "${sum_p[window]}" \
    "${sum_s[ack]}" "${sum_d[ack]}" "${sum_p[ack]}" <<'PY'
import sys
r, secs = int(sys.argv[1]), float(sys.argv[2])
off, win, ack = (float(x) / r for x in sys.argv[3:6])
sw, dw, pw, sa, da, pa = (int(x) for x in sys.argv[6:12])
# Traced time per mode: the tracer runs SECS + ~1 s around each transfer.
print(f"tracing benchmark: bpf_dctcp bulk over veth (no offloads), {r} rounds x {secs:.0f} s per mode")
print(f"  throughput  off {off:.2f} Gbit/s | per-window {win:.2f} ({win/off:.3f} x off, cost {100*(1-win/off):+.1f} %) | per-ACK {ack:.2f} ({ack/off:.3f} x off, cost {100*(1-ack/off):+.1f} %)")
print(f"  per-window  events seen {sw}, dropped {dw}, produced {pw}; seen+dropped=produced: {sw+dw==pw}")
print(f"  per-ACK     events seen {sa}, dropped {da}, produced {pa}; seen+dropped=produced: {sa+da==pa}; "
      f"{sa/(r*secs)/1e6:.2f} M events/s delivered during transfer ({da/(r*secs):.0f}/s dropped)")
print("  targets: per-window cost <= 1 %, per-ACK cost <= 5 %, per-ACK >= 1 M events/s without loss")
PY
