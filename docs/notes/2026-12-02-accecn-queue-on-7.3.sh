#!/bin/sh
# lab queue with bpf_prague and bpf_dctcp through the BPF step, classic ECN
# against AccECN, in Debian's 7.3 under QEMU (TCG). Run from the repository:
#   VM_KERNEL=7.3 netns-lab/vm/run-in-vm sh -c ./docs/notes/2026-12-02-accecn-queue-on-7.3.sh
# Results go to target/accecn-queue/<feedback>-<round>/; `loader flows
# --json` taken 10, 14 and 18 s into each round (the Prague run: the lab
# takes some seconds to build under TCG) shows each socket's ecn_mode.
L=./target/release/loader
out=target/accecn-queue
rm -rf "$out"; mkdir -p "$out"
for round in 1 2; do
for ecn in classic accecn; do
    (for t in 10 4 4; do sleep $t; $L flows --json >> "$out/flows-$ecn-$round.json" 2>&1; done) &
    echo "--- $ecn, round $round"
    ./target/release/lab --ecn "$ecn" queue --rates 100M --duration 20 \
        --variants bpf_prague:bpf-step,bpf_dctcp:bpf-step --out "$out/$ecn-$round" 2>&1 |
        grep -E "queue mean|trace:"
    wait
    python3 - "$out/flows-$ecn-$round.json" <<'PY'
import json, sys
dec = json.JSONDecoder()
text, i = open(sys.argv[1]).read(), 0
while i < len(text):
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    snap, i = dec.raw_decode(text, i)
    for f in snap:
        print("  flows:", f["algorithm"], f.get("ecn_mode"), "delivered", f["delivered"], "ce", f["delivered_ce"])
PY
done
done
