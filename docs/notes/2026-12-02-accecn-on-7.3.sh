#!/bin/sh
# In the 7.3 VM: do two bpf_prague ends at tcp_ecn = 3 negotiate AccECN?
# The client in the VM's own namespace (pins and the struct_ops link live in
# its bpffs), the server in a namespace of its own.
L=./target/release/loader
uname -r
for mode in 3 1; do
  echo "=== tcp_ecn=$mode on both ends"
  ip netns add accb
  ip link add va type veth peer name vb netns accb
  ip addr add 198.18.0.1/24 dev va; ip -n accb addr add 198.18.0.2/24 dev vb
  ip -n accb link set lo up; ip link set va up; ip -n accb link set vb up
  sysctl -qw net.ipv4.tcp_ecn=$mode; ip netns exec accb sysctl -qw net.ipv4.tcp_ecn=$mode
  $L attach --algo prague --name bpf_prague --ect1-dev va 2>&1 | tail -1
  ip netns exec accb iperf3 -s -1 -D
  sleep 1
  iperf3 -c 198.18.0.2 -C bpf_prague -t 4 > /tmp/iperf.txt 2>&1 &
  sleep 2.5
  ss -tin 2>&1 | grep -A1 5201 | cut -c1-160 | head -6
  $L flows --all --json 2>&1 | head -c 1200; echo
  $L flows 2>&1 | head -5
  wait
  grep -E "sender|receiver" /tmp/iperf.txt | tail -2
  $L list --json 2>/dev/null | python3 -c "import json,sys; [print(i['name'], 'ect1_packets', i.get('ect1_packets')) for i in json.load(sys.stdin)]"
  nstat -az 2>/dev/null | grep -i -E "accecn|ecn" | head -12
  $L detach bpf_prague 2>&1 | tail -1
  ip link del va; ip netns del accb
done
