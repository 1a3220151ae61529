# Sourced by the bench scripts: a run's provenance and its results file.
# bench_begin NAME TITLE "$@" records the start (date, load average, command
# line) and makes $T, a temp folder removed on exit (then BENCH_ON_EXIT, a
# command of the script's own, runs too); bench_write FUNCTION runs FUNCTION,
# whose stdout is the run's summary in Markdown, prints it, and writes
# bench/results/NAME.md (BENCH_RESULTS=DIR: DIR/NAME.md) as a provenance table
# and that summary: a temp file in the same folder, then a rename, so a failed
# or interrupted run leaves the old file whole. Not a test.

bench_exit() {
    local rc=$?
    # The script's clean-up runs whole, whatever its commands return (set -e
    # would stop it at the first: netns_down's kill of a process that is gone).
    ${BENCH_ON_EXIT:-:} || true
    rm -rf "$T"
    [ -z "${BENCH_PART:-}" ] || rm -f "$BENCH_PART"
    return $rc
}

bench_begin() {   # bench_begin NAME TITLE ARGS...: ARGS are the script's own
    BENCH_NAME=$1
    BENCH_TITLE=$2
    shift 2
    BENCH_CMD="bench/$(basename "$0")"
    [ $# = 0 ] || BENCH_CMD+=" $(printf '%q ' "$@")"
    BENCH_CMD=${BENCH_CMD% }
    BENCH_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    BENCH_T0=$(date +%s)
    BENCH_LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
    # The commit as the run starts (a commit made meanwhile is not what ran),
    # and whether tracked files other than Markdown (docs, results files)
    # differ from it: those cannot change what is measured.
    BENCH_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
    BENCH_DIRTY=$(git status --porcelain --untracked-files=no -- . ':(exclude)*.md' 2>/dev/null)
    T=$(mktemp -d)
    trap bench_exit EXIT
    trap 'exit 130' INT TERM
}

version_field() { sed -n "s/^$1: *//p" <<<"$2"; }   # version_field NAME "$(parity --version)"

# The provenance table: when, what code, what machine, how busy it was.
bench_provenance() {
    local cpu v
    cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
    v=$(./build/parity --version 2>/dev/null || true)
    echo "# $BENCH_TITLE"
    echo
    echo "Written by \`bench/$(basename "$0")\`; \`bench/run-all.sh\` rewrites every results file."
    echo
    echo "| provenance | |"
    echo "|---|---|"
    echo "| date (UTC) | $BENCH_DATE, $(($(date +%s) - BENCH_T0)) s |"
    echo "| command | \`$BENCH_CMD\` |"
    echo "| commit | $BENCH_COMMIT$([ -z "$BENCH_DIRTY" ] || echo " (dirty: uncommitted changes to code)") |"
    echo "| CPU | ${cpu:-unknown}, $(nproc) CPUs online$(
        grep -q '^flags.* hypervisor' /proc/cpuinfo && echo ", a virtual machine") |"
    echo "| compiler | $(version_field compiler "$v"), $(version_field 'build type' "$v"); kernels $(version_field kernels "$v") |"
    [ -z "$(version_field MPI "$v")" ] || echo "| MPI | $(version_field MPI "$v" | cut -d, -f1) |"
    echo "| load average (1, 5, 15 min) | $BENCH_LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end |"
    echo
}

bench_write() {   # bench_write FUNCTION: FUNCTION prints the summary (Markdown)
    local dir=${BENCH_RESULTS:-bench/results}
    "$@" >"$T/summary.md"
    cat "$T/summary.md"
    mkdir -p "$dir"
    BENCH_PART=$(mktemp "$dir/$BENCH_NAME.md.tmp.XXXXXX")
    { bench_provenance; cat "$T/summary.md"; } >"$BENCH_PART"
    chmod 644 "$BENCH_PART"
    mv -f "$BENCH_PART" "$dir/$BENCH_NAME.md"
    BENCH_PART=
    echo "wrote $dir/$BENCH_NAME.md" >&2
}

# bench_parity: P, the path of build/parity (built first if missing), and
# Open MPI allowed to run as root.
bench_parity() {
    P=$(readlink -f ./build/parity)
    [ -x "$P" ] || { cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

# bench_key: key, the signing key (PARITY_KEY, or the user's: made if missing).
bench_key() {
    key=${PARITY_KEY:-$HOME/.config/parity/parity.key}
    [ -e "$key" ] || "$P" table keygen --key "$key"
}
