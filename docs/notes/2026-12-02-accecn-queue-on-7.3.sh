#!/bin/sh
# lab queue with bpf_prague and bpf_dctcp through the BPF step, classic ECN
# against AccECN, in Debian's 7.3 under QEMU (TCG). Run from the repository:
#   VM_KERNEL=7.3 netns-lab/vm/run-in-vm sh -c ./docs/notes/2026-12-02-accecn-queue-on-7.3.sh
# Results go to target/accecn-queue/<feedback>-<round>/; a `loader flows
# --json` taken 6 s into each first run shows each socket's ecn_mode.
L=./target/release/loader
out=target/accecn-queue
rm -rf "$out"; mkdir -p "$out"
for round in 1 2 3; do
for ecn in classic accecn; do
    (sleep 6; $L flows --json > "$out/flows-$ecn-$round.json" 2>&1) &
    echo "--- $ecn, round $round"
    ./target/release/lab --ecn "$ecn" queue --rates 100M --duration 10 \
        --variants bpf_prague:bpf-step,bpf_dctcp:bpf-step --out "$out/$ecn-$round" 2>&1 |
        grep -E "queue mean|trace:"
    wait
    python3 - "$out/flows-$ecn-$round.json" <<'PY'
import json, sys
for f in json.load(open(sys.argv[1])):
    print("  flows:", f["algorithm"], f.get("ecn_mode"), "delivered", f["delivered"], "ce", f["delivered_ce"])
PY
done
done
