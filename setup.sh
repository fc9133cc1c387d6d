#!/usr/bin/env bash
# One-command set-up for dctcp-bpf on Debian bookworm (run as root: `sudo ./setup.sh`).
# Installs every system package and tool the build, the tests and the labs use.
# Idempotent: running it again only installs what is missing.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: must run as root (try: sudo ./setup.sh)" >&2
    exit 1
fi
. /etc/os-release
if [ "${ID:-}" != debian ] || [ "${VERSION_CODENAME:-}" != bookworm ]; then
    echo "setup.sh: written for Debian bookworm; this is ${PRETTY_NAME:-unknown}." >&2
    echo "  Ubuntu 24.04: apt install clang llvm libelf-dev zlib1g-dev pkg-config libclang-dev" >&2
    echo "  iproute2 ethtool iperf3 linux-tools-common linux-tools-\$(uname -r) tmux util-linux; cargo install just" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# bpftool 7.5 (regenerating vmlinux.h, inspecting struct_ops) and the stock 6.12
# kernel for `just vm-test` come from bookworm-backports.
bp=/etc/apt/sources.list.d/bookworm-backports.list
if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "deb http://deb.debian.org/debian bookworm-backports main" >"$bp"
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    clang-19 llvm-19 libclang-19-dev libelf-dev zlib1g-dev pkg-config make \
    iproute2 ethtool iperf3 util-linux procps tmux passwd fonts-dejavu-core curl \
    >/dev/null
# `just install` and its tests: man pages (man-db), `systemd-analyze verify`
# of the unit (systemd; it need not run), the .deb (dpkg-deb, in dpkg).
apt-get install -y -qq --no-install-recommends man-db systemd >/dev/null
# `loader serve`'s test scrapes it with a real Prometheus (the package's
# service starts only under a running systemd; the test runs its own).
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# `just image` builds the loader's OCI image (FROM scratch: no container
# runs to build it, so no runtime setup is needed).
apt-get install -y -qq --no-install-recommends podman >/dev/null
# deploy/validate decodes the Kubernetes manifests with the API's Python models.
apt-get install -y -qq --no-install-recommends python3-kubernetes python3-yaml >/dev/null
# `lab --pcap`'s test reads its captures with tshark, as users will
# (wireshark-common's setuid dumpcap is declined: the lab runs as root).
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get install -y -qq --no-install-recommends tshark >/dev/null
# `lab bench` measures the switch's programs by perf's samples too.
apt-get install -y -qq --no-install-recommends linux-perf >/dev/null
# The report's browser test renders index.html and `lab compare`'s page in
# headless Chromium, as people will read them.
apt-get install -y -qq --no-install-recommends chromium >/dev/null
apt-get install -y -qq --no-install-recommends bpftool/bookworm-backports >/dev/null

# clang-19 is the BPF compiler; libbpf-cargo calls `clang`.
for t in clang llvm-strip; do
    [ -x "/usr/local/bin/$t" ] || ln -sf "/usr/bin/$t-19" "/usr/local/bin/$t"
done

# Rust comes from rustup (bookworm's rustc 1.63 is too old for libbpf-rs).
if ! command -v cargo >/dev/null; then
    for d in "${SUDO_USER:+$(getent passwd "$SUDO_USER" | cut -d: -f6)}" /root; do
        [ -n "$d" ] && [ -x "$d/.cargo/bin/cargo" ] && export PATH="$d/.cargo/bin:$PATH" && break
    done
fi
if ! command -v cargo >/dev/null; then
    echo "setup.sh: cargo not found; install Rust with rustup (https://rustup.rs), then rerun." >&2
    exit 1
fi
command -v just >/dev/null || cargo install --locked --quiet just
[ -x /usr/local/bin/just ] || ln -sf "$(command -v just)" /usr/local/bin/just
# cargo-mutants: `just mutants`, the suite's strength on the analysis code.
cargo mutants --version 2>/dev/null | grep -qx "cargo-mutants 27.1.0" ||
    cargo install --locked --quiet --version 27.1.0 cargo-mutants
# deploy/crd-check (Go): the ServiceMonitor against the Prometheus Operator's
# own type. Its modules now, so the test only compiles.
go=$(command -v go || echo /usr/local/go/bin/go)
if [ -x "$go" ]; then
    (cd "$(dirname "$0")/deploy/crd-check" && "$go" mod download)
else
    echo "setup.sh: no Go toolchain (go): the ServiceMonitor check in just test needs one (https://go.dev/dl)" >&2
    exit 1
fi

# bpffs: the loader pins algorithms under /sys/fs/bpf/dctcp-bpf.
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

# --- stock-kernel VM tier ----------------------------------------------------
# netns-lab/vm/run-in-vm runs commands inside Debian's stock kernels: 6.12 (from
# bookworm-backports: sch_red, sch_netem, tcp_dctcp as modules, fq_codel built
# in, BTF), booted by virtme-ng under QEMU (TCG). The kernel goes to /boot and
# /lib/modules and is never booted on the host. `pkg/bookworm-backports` takes
# only the kernel from backports; `-t bookworm-backports` would also upgrade
# systemd and udev (dependencies of initramfs-tools) to backports versions.
# busybox-static: virtme-ng builds a small initramfs (9p is a module in 6.12).
apt-get install -y -qq --no-install-recommends \
    qemu-system-x86 busybox-static python3-venv \
    linux-image-amd64/bookworm-backports >/dev/null
# Debian 12's own 6.1 for `just vm-test 6.1`: the versioned image bookworm's
# linux-image-amd64 depends on (that metapackage itself is the 6.12 one now).
k61=$(apt-cache depends linux-image-amd64/bookworm | awk '/Depends: linux-image-6\.1\./ && !n++ {print $2}')
if [ -z "$k61" ]; then
    echo "setup.sh: bookworm's index names no 6.1 kernel image (apt-get update?)" >&2
    exit 1
fi
apt-get install -y -qq --no-install-recommends "$k61" >/dev/null
# Debian's newest 7.3 kernel for `just vm-test 7.3` (in `just test-slow`):
# trixie-backports, read through a private apt state so this system's own
# sources never see trixie, and unpacked rather than installed (its
# dependencies are trixie's). From 6.19 Debian splits the kernel into
# linux-binary (the image, beside its modules), linux-modules and linux-base.
# Not needed by `just test`: a failure here is a warning, and
# `just vm-test 7.3` then says the kernel is missing.
tb=/var/cache/dctcp-bpf/trixie-backports
fetch_73() {
    mkdir -p "$tb/lists/partial" "$tb/archives/partial"
    echo "deb http://deb.debian.org/debian trixie-backports main" >"$tb/sources.list"
    local apt_tb=(-o Dir::Etc::sourcelist="$tb/sources.list" -o Dir::Etc::sourceparts=/dev/null
        -o Dir::State::Lists="$tb/lists" -o Dir::Cache::Archives="$tb/archives")
    apt-get "${apt_tb[@]}" update -qq || return 1
    local k73
    k73=$(apt-cache "${apt_tb[@]}" search --names-only '^linux-binary-7\.3\.[0-9]+\+deb13-amd64$' |
        awk '{print $1}' | sed 's/^linux-binary-//' | sort -V | tail -n 1)
    [ -n "$k73" ] || { echo "setup.sh: trixie-backports lists no 7.3 kernel (linux-binary-7.3.*)" >&2; return 1; }
    (cd "$tb/archives" && apt-get "${apt_tb[@]}" download -qq \
        "linux-binary-$k73" "linux-modules-$k73" "linux-base-$k73" 2>/dev/null) || return 1
    local deb
    for deb in "$tb/archives"/linux-{binary,modules,base}-"$k73"_*.deb; do dpkg-deb -x "$deb" / || return 1; done
    depmod "$k73" && rm -f "$tb/archives"/*.deb
}
if ! ls /lib/modules/7.3.*/vmlinuz >/dev/null 2>&1; then
    fetch_73 || echo "setup.sh: warning: Debian's 7.3 kernel could not be fetched (just vm-test 7.3 and just test-slow need it; just test does not)" >&2
fi

# virtme-ng (vng) from PyPI, in its own venv on Debian's python (bookworm's
# system python refuses `pip install`; pyenv's is per user), linked into
# /usr/local/bin. Reinstalled only when the pinned version is missing.
vng_venv=/opt/virtme-ng vng_version=1.42
if ! "$vng_venv/bin/pip" show virtme-ng 2>/dev/null | grep -x "Version: $vng_version" >/dev/null; then
    /usr/bin/python3 -m venv "$vng_venv"
    "$vng_venv/bin/pip" install --quiet --disable-pip-version-check "virtme-ng==$vng_version"
fi
for t in vng virtme-run; do ln -sf "$vng_venv/bin/$t" "/usr/local/bin/$t"; done

echo "setup.sh: done. Next: just test"
