#!/bin/sh
L=./target/release/loader
$L attach --algo prague --name bpf_prague --ect1-dev va >/dev/null 2>&1 || true
for mode in 3 1; do
ip netns add accb
ip link add va type veth peer name vb netns accb
ip addr add 198.18.0.1/24 dev va; ip -n accb addr add 198.18.0.2/24 dev vb
ip -n accb link set lo up; ip link set va up; ip -n accb link set vb up
sysctl -qw net.ipv4.tcp_ecn=$mode; ip netns exec accb sysctl -qw net.ipv4.tcp_ecn=$mode
$L detach bpf_prague >/dev/null 2>&1
$L attach --algo prague --name bpf_prague --ect1-dev va 2>&1 | cut -c1-40
ip netns exec accb iperf3 -s -1 -D; sleep 1
iperf3 -c 198.18.0.2 -t 10 -C bpf_prague > /tmp/ip.txt 2>&1 &
sleep 2
echo "--- tcp_ecn=$mode: flows --json"; $L flows --json > /tmp/f.json 2>&1; python3 -c "
import json
for f in json.load(open('/tmp/f.json')): print(f['netns'], f['local'], f['algorithm'], 'ecn', f['ecn'], f.get('ecn_mode'), 'delivered', f['delivered'], 'ce', f['delivered_ce'])" || cat /tmp/f.json | head -c 600
wait
grep sender /tmp/ip.txt
ip link del va; ip netns del accb
done
$L detach bpf_prague
