# dctcp-bpf: every recipe a user or CI runs. `just --list` shows them.

set shell := ["bash", "-euo", "pipefail", "-c"]

# cargo from rustup, also under sudo
export PATH := env_var('HOME') + "/.cargo/bin:" + env_var('PATH')

loader := "target/release/loader"

# BPF programs this project loads, as `bpftool prog show` names them
our_progs := " name ([xk]?dctcp_|dump_tcp|bottleneck_egre|receiver_ingre)"

# Show the recipes
default:
    @just --list

# Install every system package and tool (Debian bookworm; needs root)
setup:
    ./setup.sh

# Build the loader (with its BPF objects) and the lab
build:
    cargo build --release --workspace

# Unit and integration tests on the running kernel (root), then the
# stock-kernel VM tiers, each followed by a leak check; ends with how many
# tests ran, passed, failed and were ignored in each tier. One release
# build (with overflow checks) serves every tier. A failing tier does not
# stop the others: the run fails at the end, with every failure in its log
test: _root
    #!/usr/bin/env bash
    set -uo pipefail
    tools/clear-stale-registrations && just _leftover-baseline && tools/bpf-mutants --check || exit 1
    mkdir -p target
    r=0
    cargo test --release --workspace --no-fail-fast 2>&1 | tee target/test-host.log || r=1
    tools/bpf-stack-check 2>&1 | tee -a target/test-host.log || r=1
    just check-leftovers || r=1
    just vm-test 6.12 2>&1 | tee target/test-vm.log || r=1
    just vm-test 6.1 2>&1 | tee target/test-vm61.log || r=1
    just check-leftovers || r=1
    just _test-counts "host (this kernel)" target/test-host.log
    just _test-counts "stock-kernel VM, Debian 6.12" target/test-vm.log
    just _test-counts "stock-kernel VM, Debian 6.1" target/test-vm61.log
    if [ "$r" != 0 ]; then echo "just test: FAILED (the failures are above, and in target/test-*.log)" >&2; fi
    exit $r

# Every unit test, the loader's integration tests, the switch, probe,
# round-trip and docs tests, every lab test that refuses bad input and the
# BPF stack check; no experiment's long run, no VM. Binaries run one after
# another (namespaces and timings must not share the CPUs); unit tests run
# in parallel. `just test` stays the gate.
# The fast tier for working: under a minute after a build
test-fast: _root
    #!/usr/bin/env bash
    set -uo pipefail
    mkdir -p target
    start=$(date +%s)
    tools/clear-stale-registrations || exit 1
    (
        r=0
        cargo test --release --workspace --lib --bins || r=1
        cargo test --release -p loader --tests --no-fail-fast || r=1
        cargo test --release -p netns-lab --no-fail-fast --test switch --test probe --test rtt --test docs --test layout || r=1
        cargo test --release -p netns-lab --tests --no-fail-fast -- refuse refused exit_2 lacks_says || r=1
        tools/bpf-stack-check || r=1
        exit $r
    ) 2>&1 | tee target/test-fast.log
    r=${PIPESTATUS[0]}
    just _test-counts "fast tier (this kernel)" target/test-fast.log
    echo "just test-fast: $(( $(date +%s) - start )) s"
    exit $r

# Sums cargo's "test result:" lines of a log: TIER: ran, passed, failed,
# ignored, and skipped (a test that found it cannot run here prints
# `SKIP <test>: <why>` and passes; it is counted as skipped, not passed)
_test-counts TIER LOG:
    @awk -v tier="{{TIER}}" '/^test result:/ { for (i = 1; i < NF; i++) { w = $(i + 1); if (w ~ /^passed/) p += $i; else if (w ~ /^failed/) f += $i; else if (w ~ /^ignored/) g += $i } } /^SKIP / { s++; print "  " $0 } END { printf "%s: %d tests ran, %d passed, %d failed, %d ignored, %d skipped\n", tier, p - s + f, p - s, f, g, s }' {{LOG}}

# Queue occupancy, DCTCP against TCP (paper Fig. 1): `just lab-queue --quick`, `lab queue --help`
lab-queue *ARGS: _root
    cargo build --release --workspace
    target/release/lab queue {{ARGS}}

# Marking threshold K against C x RTT / 7, and K_min by bisection (seed 001): `just lab-ksweep --quick`, `lab ksweep --help`
lab-ksweep *ARGS: _root
    cargo build --release --workspace
    target/release/lab ksweep {{ARGS}}

# The sawtooth of N flows against DCTCP's analysis (seed 000, paper Fig. 12): `just lab-sawtooth --quick`, `lab sawtooth --help`
lab-sawtooth *ARGS: _root
    cargo build --release --workspace
    target/release/lab sawtooth {{ARGS}}

# Convergence as flows come and go (seed 000, paper Fig. 16), about 27 min: `just lab-convergence --quick`, `lab convergence --help`
lab-convergence *ARGS: _root
    cargo build --release --workspace
    target/release/lab convergence {{ARGS}}

# DCTCP beside Reno through seed 002's dual AQM (Table I, Figs. 5-10), about 55 min: `just lab-coexist --quick`, `lab coexist --help`
lab-coexist *ARGS: _root
    cargo build --release --workspace
    target/release/lab coexist {{ARGS}}

# xDCTCP against DCTCP with short flows, and a (g, ns, nl) sweep (seed 003): `just lab-xdctcp --quick`, `lab xdctcp --help`
lab-xdctcp *ARGS: _root
    cargo build --release --workspace
    target/release/lab xdctcp {{ARGS}}

# DCTCP against each seed 002 modification, side by side: `just lab-variants --quick`, `lab variants --help`
lab-variants *ARGS: _root
    cargo build --release --workspace
    target/release/lab variants {{ARGS}}

# Incast: N workers answer one aggregator at once (paper's incast): `just lab-incast --quick`, `lab incast --help`
lab-incast *ARGS: _root
    cargo build --release --workspace
    target/release/lab incast {{ARGS}}

# RPC tail latency and fairness, DCTCP vs cubic (seed 004): `just lab-rpc --quick`, `lab rpc --help`
lab-rpc *ARGS: _root
    cargo build --release --workspace
    target/release/lab rpc {{ARGS}}

# Benchmarks, ratios measured side by side in one run (`lab bench --help`); then the kernel's dctcp in the VM
bench *ARGS: _root
    cargo build --release --workspace
    target/release/lab bench {{ARGS}}
    @echo "bpf_dctcp against the kernel's own dctcp, in Debian's 6.12 under QEMU (TCG: compare ratios, not absolutes)"
    netns-lab/vm/run-in-vm target/release/lab bench --baselines reno,cubic,dctcp --no-tracing --rounds 3 --mib 64 --switch-secs 0 --scale 1 --delay-rates 20M --delay-backends netem,element --delay-secs 5 --out bench/results/$(date -u +%Y%m%d-%H%M%S)-vm-6.12.json

# 6.12 runs netns-lab/tests/vm.rs (the kernel backends red and fq_codel,
# netem, the kernel's dctcp); 6.1 the loader's tests (struct_ops without
# links: map mode; all but `loader top`'s screen test, whose drawing does
# not depend on the kernel and whose maps the other top tests read there)
# and the lab without tcx (vm.rs's before_tcx_* and
# red_step_*, which 6.12 skips: its bpf_dctcp-on-red runs in the comparison
# with the kernel's dctcp).
# Each ends with check-leftovers inside the VM (no baseline: a fresh boot).
# 7.3 (Debian's newest 7.3 from trixie-backports, which setup.sh unpacks)
# runs what 6.12 runs and the fault tests' strict branches (vm.rs strict_*:
# no guard repair allowed, then tests/faults.rs's own judges); `just
# test-slow` runs it, `just test` does not (its 30 minutes are spent).
# Stock Debian kernels under QEMU (TCG): KERNEL all (6.12 and 6.1), 6.12, 6.1 or 7.3
vm-test KERNEL="all": _root
    #!/usr/bin/env bash
    set -euo pipefail
    case "{{KERNEL}}" in all|6.12|6.1|7.3) ;; *) echo "vm-test: KERNEL is all, 6.12, 6.1 or 7.3, not {{KERNEL}}" >&2; exit 2 ;; esac
    cargo build --release --workspace
    if [ "{{KERNEL}}" = all ] || [ "{{KERNEL}}" = 6.12 ] || [ "{{KERNEL}}" = 7.3 ]; then
        cargo test --release -p netns-lab --test vm --no-run
        # strict_*: the fault tests' strict branches (issue 37), 7.3 only:
        # just test's 30 minutes have no room for them on 6.12.
        strict=$([ "{{KERNEL}}" = 7.3 ] && echo "" || echo "--skip strict_")
        VM_KERNEL=$([ "{{KERNEL}}" = 7.3 ] && echo 7.3 || echo 6.12) netns-lab/vm/run-in-vm sh -c "env DCTCP_BPF_VM=1 cargo test --release --offline -p netns-lab --test vm -- --include-ignored --test-threads=1 --nocapture --skip before_tcx_ --skip red_step_backend_holds_dctcp_at_k $strict; r=\$?; just check-leftovers /dev/null || r=1; exit \$r"
    fi
    if [ "{{KERNEL}}" = all ] || [ "{{KERNEL}}" = 6.1 ]; then
        cargo test --release -p loader --no-run
        cargo test --release -p netns-lab --test vm --no-run
        VM_KERNEL=6.1 netns-lab/vm/run-in-vm sh -c 'r=0; cargo test --release --offline --no-fail-fast -p loader --tests -- --test-threads=1 --skip dashboard_shows_a_live_flow --skip prometheus_scrapes --skip serve_reads_its_own_flows --skip deploy_ || r=1; env DCTCP_BPF_VM=1 cargo test --release --offline -p netns-lab --test vm -- --include-ignored --test-threads=1 --nocapture red_step_backend_holds_dctcp_at_k before_tcx_ || r=1; just check-leftovers /dev/null || r=1; exit $r'
    fi

# cargo-mutants over the analysis and control code (about 40 min), then
# instance.rs, attach_file.rs and preflight.rs against the lifecycle
# tests: caught / missed / unviable per file in target/mutants-*/. Fails
# when fewer than MIN percent (default 90) of the viable mutants are
# caught; missed and timed-out ones count against it.
# Mutation testing of the analysis and control code, with a gate
mutants *ARGS: _root
    #!/usr/bin/env bash
    set -uo pipefail
    min=${MIN:-90}
    # A mutant of detach leaks map-mode registrations; none may outlive the run.
    trap tools/clear-stale-registrations EXIT
    cargo mutants --no-shuffle --output target/mutants-analysis -p netns-lab -p loader \
        -f netns-lab/src/stats.rs -f netns-lab/src/measure/theory.rs -f netns-lab/src/traffic/schedule.rs \
        -f netns-lab/src/measure/fairness.rs -f netns-lab/src/units.rs -f loader/src/params.rs \
        -f loader/src/algo.rs -f loader/src/model.rs {{ARGS}} -- --lib
    cargo mutants --no-shuffle --output target/mutants-instance -p loader \
        -f loader/src/instance.rs -f loader/src/attach_file.rs {{ARGS}} \
        -- --lib --test lifecycle --test detach_all --test unit
    # The experiments' validation, plan of a run and analysis: the
    # functions the unit tests reach (their loops, plots and summaries only
    # the lab's minutes-long runs do). coexist, convergence and variants are
    # not in it yet.
    fns='validate|scenario|bottleneck|measure|finding|clip|burst_limit|window_cap|window_cap_pkts|onset|share|grid|search_k_min|boundary|ratio|of|k_opt|default_rwnd_clamp_pkts|excerpt_span_s|per_second|steps|pct|settings|parse_variant|marks|is_dctcp|label|defaults'
    name="([A-Za-z]+(<[^>]*>)?::)?($fns)"
    cargo mutants --no-shuffle --output target/mutants-experiments -p netns-lab \
        -f netns-lab/src/experiments/mod.rs -f netns-lab/src/experiments/incast.rs \
        -f netns-lab/src/experiments/ksweep.rs -f netns-lab/src/experiments/queue.rs \
        -f netns-lab/src/experiments/rpc.rs -f netns-lab/src/experiments/sawtooth.rs \
        -f netns-lab/src/experiments/xdctcp.rs --re "(replace $name ->| in $name\$)" {{ARGS}} -- --lib
    # cargo-mutants exits non-zero whenever a mutant is missed: the score decides.
    caught=0 missed=0
    for d in target/mutants-analysis target/mutants-instance target/mutants-experiments; do
        o=$d/mutants.out
        c=$(wc -l < $o/caught.txt) m=$(wc -l < $o/missed.txt) t=$(wc -l < $o/timeout.txt) u=$(wc -l < $o/unviable.txt)
        echo "$d: $c caught, $m missed, $t timeouts, $u unviable"
        caught=$((caught + c)) missed=$((missed + m + t))
    done
    total=$((caught + missed))
    [ "$total" -gt 0 ] || { echo "just mutants: no viable mutant ran" >&2; exit 1; }
    echo "just mutants: $caught of $total viable mutants caught ($((100 * caught / total)) %; the gate is $min %)"
    [ $((100 * caught)) -ge $((min * total)) ] || { echo "just mutants: below $min %: the missed ones are in target/mutants-*/mutants.out/missed.txt" >&2; exit 1; }

# The slow tier, which CI does not run (about an hour and a half): the
# headline findings on long runs (netns-lab/tests/findings.rs), the VM tier
# on Debian's 7.3, `just mutants` (the share of caught mutants against its
# gate) and `just mutants-bpf` (no survivor), each run whatever the others
# give; docs/testing.md reports its last result with its date.
# The slow tier: the findings on long runs, Debian 7.3, both mutation gates
test-slow: _root build
    #!/usr/bin/env bash
    set -uo pipefail
    r=0
    cargo test --release -p netns-lab --test findings -- --ignored --nocapture --test-threads 1 || r=1
    just vm-test 7.3 || r=1
    just mutants || r=1
    just mutants-bpf || r=1
    [ "$r" = 0 ] && echo "just test-slow: passed" || echo "just test-slow: FAILED (above)" >&2
    exit $r

# Hand-made mutants of the BPF programs (and rpcgen), each against the tests
# that stand behind it: `tools/bpf-mutants --help` (about 20 min)
mutants-bpf *ARGS: _root
    tools/bpf-mutants {{ARGS}}

# Install binaries, man pages, completions, dctcp-bpf.service and /etc/dctcp-bpf/attach.toml under $PREFIX (default /usr/local): tools/install --help
install: _root build
    tools/install

# Remove what `just install` installed (same PREFIX; a changed attach.toml is kept)
uninstall: _root
    tools/install --uninstall

# Build target/debian/dctcp-bpf_<version>-1_<arch>.deb: binaries, man pages, completions, unit, config
deb: build
    tools/deb

# Build the loader's OCI image (deploy/Containerfile, FROM scratch: the loader and its libraries) with podman or buildah: docs/fleet.md
image TAG="localhost/dctcp-bpf:latest": build
    tools/image {{TAG}}

# Run the image's entrypoint as the DaemonSet does (attach, serve, preStop detach) from its own root filesystem: tools/image-check
image-check TAG="localhost/dctcp-bpf:latest": _root
    tools/image-check {{TAG}}

# Check the Kubernetes manifests of deploy/ against the API types, offline
check-deploy:
    deploy/validate
    promtool check config deploy/prometheus-scrape.yaml

# Check that every command, option, recipe and link README.md and docs/ show exist (no root needed)
check-docs:
    cargo test -p netns-lab --test docs

# Register bpf_dctcp with default parameters and show it
attach: _root build
    {{loader}} attach --algo dctcp
    {{loader}} list

# Unregister every algorithm the loader attached
detach: _root build
    {{loader}} detach --all

# Fail if a test or lab left a namespace, link, pin, registration or program
check-leftovers BASELINE="target/leftover-programs": _root
    #!/usr/bin/env bash
    set -euo pipefail
    our_programs() { bpftool prog show 2>/dev/null | grep -E '{{our_progs}}' | cut -d: -f1 || true; }
    # Programs are freed once the last socket using them closes, after RCU
    # grace periods that took over 5 s once at the end of the suite (up to
    # 30 s allowed). Those loaded before the suite started (see
    # _leftover-baseline) are not its own.
    baseline={{BASELINE}}
    for _ in $(seq 300); do
        progs=$(our_programs | { grep -vxFf "$baseline" 2>/dev/null || true; } | wc -l)
        [ "$progs" -eq 0 ] && break
        sleep 0.1
    done
    ns=$(ip netns list | grep -cE '^dl[0-9a-f]{5}' || true)
    links=$(ls /sys/class/net | grep -cE '^dl[0-9a-f]{5}' || true)
    pins=$( (find /sys/fs/bpf/dctcp-bpf /sys/fs/bpf/dctcp-bpf-lab 2>/dev/null || true) | wc -l)
    cc=$(tr ' ' '\n' </proc/sys/net/ipv4/tcp_available_congestion_control | grep -cE '^(bpf_[xk]?dctcp|t_|dl[0-9a-f]{5})' || true)
    locks=$( (ls /run/dctcp-lab 2>/dev/null || true) | wc -l)
    rpcgen=$( (pgrep -x rpcgen || true) | wc -l)
    delayline=$( (pgrep -x delayline || true) | wc -l)
    # What `loader attach --from` recorded of the sysctls it changed.
    sysctls=$( (ls /run/dctcp-bpf 2>/dev/null || true) | wc -l)
    # A lab that held htb's hysteresis mode on (as labs do unless --no-htb-hysteresis) and did not put it back.
    htb=$( [ -e /run/dctcp-lab.htb_hysteresis ] && echo 1 || echo 0)
    echo "leftovers: $ns namespaces, $links links, $pins pins, $cc registrations, $progs programs, $locks lab locks, $rpcgen rpcgen processes, $delayline delay elements, $sysctls sysctl records, $htb htb hysteresis holds"
    failed=0
    for n in "$ns" "$links" "$pins" "$cc" "$progs" "$locks" "$rpcgen" "$delayline" "$sysctls" "$htb"; do [ "$n" -eq 0 ] || failed=$((failed + 1)); done
    echo "check-leftovers: $((10 - failed)) passed, $failed failed"
    [ "$failed" -eq 0 ]

# Programs of ours already loaded before a test run (a kernel that leaked a
# reference keeps them until reboot): check-leftovers does not count them.
_leftover-baseline:
    #!/usr/bin/env bash
    set -euo pipefail
    mkdir -p target
    (bpftool prog show 2>/dev/null | grep -E '{{our_progs}}' | cut -d: -f1 || true) > target/leftover-programs
    n=$(wc -l < target/leftover-programs)
    [ "$n" -eq 0 ] || echo "note: $n programs of ours were loaded before this run; not counted as its leftovers" >&2

# Regenerate the vendored bpf/vmlinux/vmlinux.h from the running kernel's BTF
vmlinux:
    bpftool btf dump file /sys/kernel/btf/vmlinux format c > bpf/vmlinux/vmlinux.h

# Remove lab namespaces and links left by crashed runs
cleanup: _root
    cargo run --quiet --release -p netns-lab --bin lab -- cleanup

_root:
    @[ "$(id -u)" -eq 0 ] || { echo "this recipe loads BPF and creates namespaces: run it as root (sudo -E env PATH=\"\$PATH\" just ...)" >&2; exit 1; }
