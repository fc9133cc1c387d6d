# dctcp-bpf: every recipe a user or CI runs. `just --list` shows them.

set shell := ["bash", "-euo", "pipefail", "-c"]

# cargo from rustup, also under sudo
export PATH := env_var('HOME') + "/.cargo/bin:" + env_var('PATH')

loader := "target/release/loader"

# BPF programs this project loads, as `bpftool prog show` names them
our_progs := " name ([xk]?dctcp_|prague_|dump_tcp|bottleneck_egre|receiver_ingre)"

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
# tests ran, passed, failed and were ignored in each tier, and how long
# each tier took (each VM test's time in target/test-vm*.times). One release
# build (with overflow checks) serves every tier. A failing tier does not
# stop the others: the run fails at the end, with every failure in its log
test: _root
    #!/usr/bin/env bash
    set -uo pipefail
    tools/clear-stale-registrations && just _leftover-baseline && tools/bpf-mutants --check || exit 1
    mkdir -p target
    r=0
    t0=$(date +%s)
    cargo test --release --workspace --no-fail-fast 2>&1 | tee target/test-host.log || r=1
    tools/bpf-stack-check 2>&1 | tee -a target/test-host.log || r=1
    just check-leftovers || r=1
    t1=$(date +%s)
    just vm-test 6.12 2>&1 | tools/test-times target/test-vm.times | tee target/test-vm.log || r=1
    t2=$(date +%s)
    just vm-test 6.1 2>&1 | tools/test-times target/test-vm61.times | tee target/test-vm61.log || r=1
    just check-leftovers || r=1
    t3=$(date +%s)
    just _test-counts "host (this kernel)" target/test-host.log
    just _test-counts "stock-kernel VM, Debian 6.12" target/test-vm.log
    just _test-counts "stock-kernel VM, Debian 6.1" target/test-vm61.log
    echo "just test took $((t3 - t0)) s: host $((t1 - t0)) s (with the build), Debian 6.12 $((t2 - t1)) s, Debian 6.1 $((t3 - t2)) s"
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
# ignored, skipped (a test that found it cannot run here prints
# `SKIP <test>: <why>` and passes; it is counted as skipped, not passed) and
# repeated (`RETRY <test>: <first failure>`, common::judged_twice); the
# CPU steal the findings' runs recorded (their `FIGURES` lines' steal_*:
# how many, the most, how many over common::STEAL_CAP's 25 %); then each
# failure's test and first line, so a log's tail says why it failed
_test-counts TIER LOG:
    @awk -v tier="{{TIER}}" '/^test result:/ { for (i = 1; i < NF; i++) { w = $(i + 1); if (w ~ /^passed/) p += $i; else if (w ~ /^failed/) f += $i; else if (w ~ /^ignored/) g += $i } } /^SKIP / { s++; print "  " $0 } /^RETRY / { r++; print "  " $0 } /^FIGURES / { for (i = 3; i <= NF; i++) if ($i ~ /^steal[a-z_]*=/) { v = substr($i, index($i, "=") + 1) + 0; ns++; if (v > most) most = v; if (v > 0.25) over++ } } /panicked at/ { why = 1; sub(/^.*thread /, ""); fail[++n] = $0; next } why > 0 { fail[n] = fail[n] " " $0; why-- } END { printf "%s: %d tests ran, %d passed, %d failed, %d ignored, %d skipped, %d repeated\n", tier, p - s + f, p - s, f, g, s, r; if (ns) printf "  steal: %d readings, at most %.1f %%, %d over the 25 %% cap\n", ns, most * 100, over; for (i = 1; i <= n; i++) print "  FAILED " fail[i] }' {{LOG}}

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

# Scalable and classic TCP through DualPI2 and one-queue AQMs (L4S, seed 002), about 55 min (20 with --quick): `just lab-l4s --quick`, `lab l4s --help`
lab-l4s *ARGS: _root
    cargo build --release --workspace
    target/release/lab l4s {{ARGS}}

# Benchmarks, ratios measured side by side in one run (`lab bench --help`); then the kernel's dctcp in the VM
bench *ARGS: _root
    cargo build --release --workspace
    target/release/lab bench {{ARGS}}
    @echo "bpf_dctcp against the kernel's own dctcp, in Debian's 6.12 under QEMU (TCG: compare ratios, not absolutes)"
    netns-lab/vm/run-in-vm target/release/lab bench --baselines reno,cubic,dctcp --no-tracing --rounds 3 --mib 64 --switch-secs 0 --scale 1 --delay-rates 20M --delay-backends netem,element --delay-secs 5 --out bench/results/$(date -u +%Y%m%d-%H%M%S)-vm-6.12.json

# 6.12 runs netns-lab/tests/vm.rs (the kernel backends red and fq_codel,
# netem, the kernel's dctcp; not the call timer's nor xdctcp's run, which
# 7.3 runs); 6.1 the loader's tests (struct_ops without
# links: map mode; all but `loader top`'s screen test, whose drawing does
# not depend on the kernel and whose maps the other top tests read there)
# and the lab without tcx (vm.rs's before_tcx_* and
# red_step_*, which 6.12 skips: its bpf_dctcp-on-red runs in the comparison
# with the kernel's dctcp).
# Each ends with check-leftovers inside the VM (no baseline: a fresh boot).
# 7.3 (Debian's newest 7.3 from trixie-backports, which setup.sh unpacks)
# runs every vm.rs test 6.12 runs or skips and the fault tests' strict branches (vm.rs strict_*:
# no guard repair allowed, then tests/faults.rs's own judges); `just
# test-slow` runs it, `just test` does not (its 30 minutes are spent).
# Stock Debian kernels under QEMU (TCG): KERNEL all (6.12 and 6.1), 6.12, 6.1 or 7.3
vm-test KERNEL="all": _root
    #!/usr/bin/env bash
    set -euo pipefail
    case "{{KERNEL}}" in all|6.12|6.1|7.3) ;; *) echo "vm-test: KERNEL is all, 6.12, 6.1 or 7.3, not {{KERNEL}}" >&2; exit 2 ;; esac
    cargo build --release --workspace
    # The test executables, built here and run in the VM as cargo would run
    # them (from their package's folder): cargo itself, in the VM, spends
    # half a minute under TCG only finding them fresh.
    # (Test targets only, under deps/: cargo also lists the binaries the tests run.)
    tests_of() { cargo test --release --no-run --message-format=json "$@" | grep -o '"executable":"[^"]*/deps/[^"]*"' | cut -d'"' -f4; }
    vm=$(tests_of -p netns-lab --test vm)
    if [ "{{KERNEL}}" = all ] || [ "{{KERNEL}}" = 6.12 ] || [ "{{KERNEL}}" = 7.3 ]; then
        # strict_*: the fault tests' strict branches (issue 37), 7.3 only:
        # just test's 30 minutes have no room for them on 6.12, nor for
        # the call timer's and xdctcp's runs, which do not depend on the
        # kernel's qdiscs, netem or dctcp (7.3 runs them).
        skip=$([ "{{KERNEL}}" = 7.3 ] && echo "" || echo "--skip strict_ --skip the_call_timer_ --skip xdctcp_and_kdctcp_")
        VM_KERNEL=$([ "{{KERNEL}}" = 7.3 ] && echo 7.3 || echo 6.12) netns-lab/vm/run-in-vm sh -c "cd netns-lab && env DCTCP_BPF_VM=1 $vm --include-ignored --test-threads=1 --nocapture --skip before_tcx_ --skip red_step_backend_holds_dctcp_at_k $skip; r=\$?; just check-leftovers /dev/null || r=1; exit \$r"
    fi
    if [ "{{KERNEL}}" = all ] || [ "{{KERNEL}}" = 6.1 ]; then
        loader=$(tests_of -p loader --tests | tr '\n' ' ')
        # Not in just test's 30 minutes: the loader tests that take the same
        # path on any kernel (bad input, a trace's file and reader, a full
        # ring, set's second path); FULL=1 (just test-slow) runs them too.
        skip="--skip dashboard_shows_a_live_flow --skip prometheus_scrapes --skip serve_reads_its_own_flows --skip deploy_"
        [ -n "${FULL:-}" ] || skip="$skip --skip trace_refuses_bad_input_clearly --skip trace_writes_one_sides --skip trace_ends_when_its_reader_goes_away --skip a_full_ring_counts --skip parameters_set_live_reach_new_flows"
        VM_KERNEL=6.1 netns-lab/vm/run-in-vm sh -c "r=0; cd loader; for t in $loader; do echo \"     Running \$t\"; \$t --test-threads=1 $skip || r=1; done; cd ../netns-lab; env DCTCP_BPF_VM=1 $vm --include-ignored --test-threads=1 --nocapture red_step_backend_holds_dctcp_at_k before_tcx_ || r=1; just check-leftovers /dev/null || r=1; exit \$r"
    fi

# cargo-mutants over eight scopes, each against the tests that reach it:
# analysis (the lab's statistics, theory, schedule, fairness and units,
# the loader's parameters, algorithms and models: unit tests), instance
# (attach/detach, the attach file and `loader check`: the lifecycle,
# unit-file and traffic tests, whose `loader flows` reads the attached
# names), preflight (the kernel probes in dctcp-utils: the loader's
# lifecycle tests), experiments (the experiments' validation, plans and
# analysis, the trace's and the faults' readings: unit tests), switch
# (tc-qdisc's backends, faults' settings, marker's record: unit tests),
# dualpi2 (tc-qdisc's model of bpf-dualpi2: unit tests), capture
# (`lab rtts`' counts and the pcapng format: unit tests) and report (the
# report model, its markdown and HTML, `lab compare`'s page: unit tests).
# SCOPES picks some (default all eight; the first five took 2 h 53 min on
# 2 CPUs at 46356d7, docs/testing.md).
# Results per mutant in target/mutants-<scope>/mutants.out/. Fails when
# fewer than MIN percent (default 90) of the viable mutants of the scopes
# run are caught; missed and timed-out ones count against it.
# DIFF=FILE mutates only the code that diff touches (cargo-mutants'
# --in-diff); a scope it does not touch is skipped, and a diff with no
# mutant in any scope passes (`just mutants-gate`, CI's gate, uses it).
# Mutation testing with a gate: SCOPES="experiments switch" just mutants
mutants *ARGS: _root
    #!/usr/bin/env bash
    set -uo pipefail
    min=${MIN:-90}
    scopes=${SCOPES:-analysis instance preflight experiments switch dualpi2 capture report}
    diff=()
    [ -z "${DIFF:-}" ] || diff=(--in-diff "$(realpath "$DIFF")")
    # A mutant of detach leaks the test instances (t_*) it should have
    # removed: their pins (dropping a link's last pin detaches it), then
    # the map-mode registrations no pin holds. None may outlive the run.
    trap 'tools/clear-stale-registrations --pins' EXIT
    # -C: the targets to build and run, both (after `--` cargo-mutants would
    # still build every test target for each mutant, 15-20 s of linking).
    # Functions by name (cargo-mutants' --re): `replace NAME ->` and `... in NAME`.
    # (A type's name may hold digits: L4sRun, Dualpi2.)
    named() { echo "(replace ([A-Za-z0-9_]+(<[^>]*>)?::)?($1) ->| in ([A-Za-z0-9_]+(<[^>]*>)?::)?($1)\$)"; }
    mkdir -p target  # a fresh clone has none, and cargo-mutants makes only the last part
    for scope in $scopes; do
        out=(--no-shuffle --output target/mutants-$scope "${diff[@]}")
        rm -rf target/mutants-$scope  # a scope the diff skips leaves no stale score
        case $scope in
        analysis)
            cargo mutants "${out[@]}" -p netns-lab -p loader \
                -f netns-lab/src/stats.rs -f netns-lab/src/measure/theory.rs -f netns-lab/src/traffic/schedule.rs \
                -f netns-lab/src/measure/fairness.rs -f netns-lab/src/units.rs -f loader/src/params.rs \
                -f loader/src/algo.rs -f loader/src/model.rs {{ARGS}} -C --lib ;;
        instance)
            cargo mutants "${out[@]}" -p loader -f loader/src/instance.rs -f loader/src/attach_file.rs \
                -f loader/src/check.rs {{ARGS}} \
                -C --lib -C --test=lifecycle -C --test=detach_all -C --test=unit -C --test=traffic ;;
        preflight)
            # (Its baseline below runs whatever the diff: skip it when the diff leaves it out.)
            if [ -n "${DIFF:-}" ] && ! grep -q '^+++ b/dctcp-utils/src/preflight.rs' "$DIFF"; then continue; fi
            # cargo-mutants 27 runs its baseline on the mutated package's own
            # tests whatever --test-package says, and dctcp-utils has no
            # lifecycle test: the baseline runs here, the mutants against the loader's.
            cargo test -q -p loader --lib --test lifecycle --test detach_all ||
                { echo "just mutants: the preflight scope's baseline (the loader's tests) fails" >&2; exit 1; }
            cargo mutants "${out[@]}" -p dctcp-utils -f dctcp-utils/src/preflight.rs --test-package loader \
                --baseline skip --timeout 120 {{ARGS}} -C --lib -C --test=lifecycle -C --test=detach_all ;;
        experiments)
            # The functions unit tests reach (loops, plots and summaries
            # only the lab's minutes-long runs do).
            fns='validate|scenario|bottleneck|measure|finding|clip|burst_limit|window_cap|window_cap_pkts|onset|share|grid'
            fns="$fns|search_k_min|boundary|ratio|of|k_opt|default_rwnd_clamp_pkts|excerpt_span_s|per_second|steps|pct"
            fns="$fns|settings|parse_variant|marks|is_dctcp|label|defaults|plan|bytes|reno|dctcp_slope|bdp_bytes|table_i"
            fns="$fns|distinct_m|m_label|equal_share_prob_ratio|slope_best|smooth_intervals|round_trip|time|time_or_length"
            fns="$fns|changes|median_convergence|mean_cov|unconverged|flow_rates|queue|drops|settle_time|flow_points"
            fns="$fns|cwnd_points|alpha_points|add|window_fraction|second_half|sender_events|ce_echo|is_none|data|acks"
            fns="$fns|reorder_hold|describe|now|since|steal_share|softirq_share|steal_note|found_note|repairs_note"
            fns="$fns|pkts_in|parse|counts|flows|config|points|senders_of|slots|rtt_of|step_from|queue_ms|class_rate"
            fns="$fns|step_scenario|expected_peak_ms|backend|name"
            files=()
            for f in mod incast ksweep queue rpc sawtooth xdctcp coexist convergence variants l4s/mod l4s/short; do
                files+=(-f netns-lab/src/experiments/$f.rs)
            done
            cargo mutants "${out[@]}" -p netns-lab "${files[@]}" -f netns-lab/src/measure/cctrace.rs \
                -f netns-lab/src/measure/fault_effects.rs -f netns-lab/src/net/link_faults.rs \
                -f netns-lab/src/measure/cpu.rs -f netns-lab/src/report/tables.rs \
                --re "$(named "$fns")" {{ARGS}} -C --lib ;;
        switch)
            fns='name|marks|at|from_str|fmt|red_step|kernel_qdisc|runs_on|validate|child_qdisc|marker_config|step|wlog'
            fns="$fns|effective_weight|to_bpf|is_none|threshold|from|over_time|departed_between|kernel_suffices|burst_bytes"
            fns="$fns|arrival_span|departed_by_arrivals|enqueued"
            cargo mutants "${out[@]}" -p tc-qdisc -f tc-qdisc/src/backend.rs -f tc-qdisc/src/faults.rs \
                -f tc-qdisc/src/marker.rs -f tc-qdisc/src/bottleneck.rs --re "$(named "$fns")" {{ARGS}} -C --lib ;;
        dualpi2)
            cargo mutants "${out[@]}" -p tc-qdisc -f tc-qdisc/src/dualpi2.rs {{ARGS}} -C --lib ;;
        capture)
            # What `lab rtts` counts and the pcapng it reads and writes (the
            # tables' print is checked against tshark's by tests/capture.rs).
            fns='parse_segment|seq_lt|seq_le|sent|acked|is_dup_ack|quantile|analyse|read|ipv4_payload|new|packet'
            fns="$fns|packet_block_len|write_block|ns|u16|u32|options|push_option|end_options|finish|written"
            cargo mutants "${out[@]}" -p netns-lab -f netns-lab/src/capture/rtts.rs -f netns-lab/src/capture/pcapng.rs \
                --re "$(named "$fns")" {{ARGS}} -C --lib ;;
        report)
            # The report model, its markdown and HTML, and `lab compare`'s
            # page (its command, and the browser's view: tests/report.rs).
            cargo mutants "${out[@]}" -p netns-lab -f netns-lab/src/report/model.rs -f netns-lab/src/report/render.rs \
                -f netns-lab/src/report/compare.rs --exclude-re "$(named 'command|write_page')" {{ARGS}} -C --lib ;;
        *) echo "just mutants: no scope $scope (analysis, instance, preflight, experiments, switch, dualpi2, capture, report)" >&2; exit 2 ;;
        esac
        # 2 and 3: mutants missed or timed out, which the score below weighs;
        # anything else (a failing baseline, bad arguments) ends the run.
        rc=$?
        case $rc in 0|2|3) ;; *) echo "just mutants: cargo mutants failed in scope $scope (exit $rc): see above" >&2; exit 1 ;; esac
    done
    # cargo-mutants exits non-zero whenever a mutant is missed: the score decides.
    caught=0 missed=0
    count() { cat "$1" 2>/dev/null | wc -l; }  # none when the diff left the scope out
    for scope in $scopes; do
        o=target/mutants-$scope/mutants.out
        c=$(count $o/caught.txt) m=$(count $o/missed.txt) t=$(count $o/timeout.txt) u=$(count $o/unviable.txt)
        echo "$scope: $c caught, $m missed, $t timeouts, $u unviable"
        caught=$((caught + c)) missed=$((missed + m + t))
    done
    total=$((caught + missed))
    if [ "$total" = 0 ] && [ -n "${DIFF:-}" ]; then echo "just mutants: the diff touches no mutant in the scopes"; exit 0; fi
    [ "$total" -gt 0 ] || { echo "just mutants: no viable mutant ran" >&2; exit 1; }
    echo "just mutants: $caught of $total viable mutants caught ($((100 * caught / total)) %; the gate is $min %)"
    [ $((100 * caught)) -ge $((min * total)) ] || { echo "just mutants: below $min %: the missed ones are in target/mutants-*/mutants.out/missed.txt" >&2; exit 1; }

# CI's mutation gate, after `just test`: `just mutants` (DIFF) over the Rust
# that changed since BASE, and tools/bpf-mutants over the BPF mutants of
# each changed file. BASE defaults to .ci/mutants-base, the commit up to
# which every scope has been run (a full run, or a gate run over the diff
# to that commit from an earlier base: docs/testing.md keeps the chain).
# Fails under MIN percent caught (90), or on any BPF mutant no test catches.
# The mutation gate over what changed since BASE (CI's)
mutants-gate BASE="": _root
    #!/usr/bin/env bash
    set -uo pipefail
    base="{{BASE}}"
    base=${base:-$(cat .ci/mutants-base)}
    # A shallow clone lacks the base: deepen it from where it came from.
    git rev-parse -q --verify "$base^{commit}" >/dev/null || git fetch -q --unshallow 2>/dev/null || true
    git rev-parse -q --verify "$base^{commit}" >/dev/null ||
        { echo "just mutants-gate: no commit $base in this clone: clone with its history (not --depth)" >&2; exit 2; }
    mkdir -p target
    git diff "$base" HEAD -- '*.rs' > target/mutants-gate.diff
    echo "just mutants-gate: $(git rev-list --count "$base"..HEAD) commits since $base, $(grep -c '^+++ ' target/mutants-gate.diff) Rust files changed"
    start=$SECONDS r=0
    DIFF=target/mutants-gate.diff just mutants || r=1
    echo "just mutants-gate: cargo-mutants took $(( (SECONDS - start) / 60 )) min"
    start=$SECONDS
    tools/bpf-mutants --changed "$base" || r=1
    echo "just mutants-gate: the BPF mutants took $(( (SECONDS - start) / 60 )) min"
    exit $r

# The slow tier, which CI does not run (about 4 hours on 2 CPUs, nearly 3
# of them `just mutants`): the headline findings on long runs
# (netns-lab/tests/findings.rs), the VM tier on Debian's 7.3, every loader
# test on Debian's 6.1, `just mutants` (the share of caught mutants
# against its gate) and `just mutants-bpf` (no survivor), each run whatever
# the others give; docs/testing.md reports its last result with its date.
# The slow tier: the findings on long runs, Debian 7.3, all of 6.1, both mutation gates
test-slow: _root build
    #!/usr/bin/env bash
    set -uo pipefail
    r=0
    cargo test --release -p netns-lab --test findings -- --ignored --nocapture --test-threads 1 || r=1
    just vm-test 7.3 || r=1
    FULL=1 just vm-test 6.1 || r=1
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
