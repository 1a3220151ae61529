#!/usr/bin/env bash
# For `git bisect run`: builds the checked-out commit in a scratch folder and
# runs `parity verify SUITE` there. Exit 0 good (verify passed), 1 bad (a
# verification failed, or parity crashed or hung), 125 skip (the commit does
# not build, or cannot read the suite), 128 abort (this script's own setup).
# It is not a test runner: ctest is not run. Copy it out of the tree first
# (older commits may lack it), e.g.
#   cp ci/git-bisect-run.sh /tmp/ && git bisect start BAD GOOD &&
#   git bisect run /tmp/git-bisect-run.sh verify/suites/quick
# Environment: PARITY_BISECT_BUILD (build folder, /tmp/parity-bisect-build),
# PARITY_BISECT_KEY (signing key; default a throwaway one), PARITY_BISECT_JOBS
# (build jobs, all cores), PARITY_BISECT_TIMEOUT (seconds for verify, 7200).
# Tested by tests/cli/test_git_bisect.sh.
set -u

abort() { echo "git-bisect-run: $*" >&2; exit 128; }

if [ $# -ne 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    echo "usage: git bisect run $0 SUITE   (SUITE: a suite file, or quick, default, full)" >&2
    exit 128
fi
SUITE=$1
SRC=$(git rev-parse --show-toplevel 2>/dev/null) || abort "not inside a git work tree"
command -v cmake >/dev/null || abort "cmake is not installed (ci/setup.sh installs it)"
BUILD=${PARITY_BISECT_BUILD:-/tmp/parity-bisect-build}
JOBS=${PARITY_BISECT_JOBS:-$(nproc 2>/dev/null || echo 2)}
COMMIT=$(git rev-parse --short HEAD) || abort "no HEAD commit"
mkdir -p "$BUILD/bisect-logs" || abort "cannot create $BUILD"
LOG="$BUILD/bisect-logs/$COMMIT.log"
OUT="$BUILD/bisect-logs/$COMMIT.verify"
: >"$LOG"

# One build folder for every commit (incremental), but only for this tree.
if [ -f "$BUILD/CMakeCache.txt" ]; then
    home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
    [ "$home" = "$SRC" ] || abort "$BUILD was configured for $home, not $SRC; set PARITY_BISECT_BUILD"
fi

verdict() { # exit code, word, why
    echo "git-bisect-run: $COMMIT $2: $3 (log: $LOG)"
    exit "$1"
}

if ! cmake -S "$SRC" -B "$BUILD" -DPARITY_WERROR=OFF >>"$LOG" 2>&1; then
    verdict 125 skip "cmake cannot configure this commit"
fi
rm -f "$BUILD/parity"   # never run a binary left from another commit
if ! cmake --build "$BUILD" --target parity -j "$JOBS" >>"$LOG" 2>&1 || [ ! -x "$BUILD/parity" ]; then
    verdict 125 skip "this commit does not build"
fi

TMP=$(mktemp -d) || abort "mktemp failed"
trap 'rm -rf "$TMP"' EXIT
KEY=${PARITY_BISECT_KEY:-}
if [ -z "$KEY" ] && "$BUILD/parity" table keygen --key "$TMP/bisect.key" >>"$LOG" 2>&1; then
    KEY=$TMP/bisect.key
fi
KEYARGS=()
[ -n "$KEY" ] && KEYARGS=(--key "$KEY")

rm -rf "$OUT"
echo "+ parity verify $SUITE --out $OUT ${KEYARGS[*]}" >>"$LOG"
timeout "${PARITY_BISECT_TIMEOUT:-7200}" "$BUILD/parity" verify "$SUITE" --out "$OUT" \
    "${KEYARGS[@]}" >>"$LOG" 2>&1 </dev/null
rc=$?
summary=$(grep -E '^(PASS|FAIL)' "$LOG" | tail -n 1)
case $rc in
0) verdict 0 good "verify passed${summary:+: $summary}" ;;
1) verdict 1 bad "verify failed${summary:+: $summary}" ;;
2) verdict 125 skip "this commit cannot read suite $SUITE (verify exit 2)" ;;
3) verdict 1 bad "verify hit a runtime error (exit 3)" ;;
124) verdict 1 bad "verify did not finish in ${PARITY_BISECT_TIMEOUT:-7200} s" ;;
*)
    if [ "$rc" -gt 128 ]; then verdict 1 bad "parity crashed (signal $((rc - 128)))"; fi
    verdict 125 skip "verify exited $rc, which says neither good nor bad"
    ;;
esac
