#!/usr/bin/env bash
# ci/git-bisect-run.sh on a throwaway repository: a copy of this source tree
# (good), a commit that reverses the order of one kernel reduction (bad:
# verify's bitwise comparison with the reference fails), a commit with a
# syntax error (cannot build); exit codes 0, 1, 125, and `git bisect run`
# naming the bad commit. Slow (one full build, then incremental ones).
# Usage: test_git_bisect.sh SOURCE_DIR   (needs fashion-mnist: data/fetch.sh)
set -u
. "$(dirname "$0")/../common/test_lib.sh"
SRC=$1
SCRIPT=$SRC/ci/git-bisect-run.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export PARITY_BISECT_BUILD=$T/build PARITY_BISECT_TIMEOUT=600
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t
export GIT_COMMITTER_EMAIL=t@example.com GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null

# The throwaway repository: tracked and untracked (not ignored) files of SRC.
R=$T/repo
mkdir -p "$R"
(cd "$SRC" && git ls-files -co --exclude-standard -z | xargs -0 sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh |
    tar --null -T - -cf -) | (cd "$R" && tar -xf -)
cd "$R" || exit 1
if ! { git init -q . && git add -A && git commit -qm good; }; then echo "cannot make the repository"; exit 1; fi
GOOD=$(git rev-parse HEAD)

# bad: the per-chunk loss sum runs over the samples in descending order.
K=src/kernels/elementwise_impl.inc
sed -i 's/for (size_t s = sa; s < sb; s++) l = l + loss\[s\];/for (size_t s = sb; s-- > sa;) l = l + loss[s];/' $K
check "the kernel reduction to reverse is there" grep -q 's-- > sa;) l = l + loss' $K
git commit -qam "bad: loss fold in descending sample order"
BAD=$(git rev-parse HEAD)
echo 'int parity_bisect_test_syntax_error(' >>src/cli/main.c
git commit -qam "cannot build: syntax error"
BROKEN=$(git rev-parse HEAD)

cat >"$T/tiny.suite" <<'EOF'
# tiny: a few steps of a small MLP, serial and omp (tests/cli/test_git_bisect.sh)
[case tiny]
dataset = fashion-mnist
model = mlp:784-32-10
batch = 32
chunk = 8
steps = 3
trainers = serial, omp
modes = exact
threads = 1, 2
repeats = 0
warmup = 0
check_steps = first
EOF

run() { # commit, expected code, name
    git checkout -q "$1"
    local t0=$SECONDS
    bash "$SCRIPT" "$T/tiny.suite" >"$T/out" 2>&1
    local rc=$?
    cat "$T/out"
    check "$3: exit $2 (got $rc, $((SECONDS - t0)) s)" test "$rc" = "$2"
    if [ "$rc" != "$2" ]; then tail -n 30 "$T/build/bisect-logs/$(git rev-parse --short HEAD).log"; fi
}
run "$GOOD" 0 "good commit"
run "$BAD" 1 "bad commit (reordered reduction)"
git checkout -q "$BAD"
bash "$SCRIPT" "$T/no-such.suite" >"$T/out" 2>&1
rc=$?
check "a suite the commit cannot read: exit 125 (got $rc)" test "$rc" = 125
run "$BROKEN" 125 "commit that does not build"
bash "$SCRIPT" >/dev/null 2>&1
check "no SUITE aborts the bisection (exit 128)" test $? = 128

# The real thing: git bisect names the bad commit.
git checkout -q "$BROKEN"
git bisect start "$BROKEN" "$GOOD" >/dev/null 2>&1
git bisect run bash "$SCRIPT" "$T/tiny.suite" >"$T/bisect.out" 2>&1
first=$(sed -n 's/^\([0-9a-f]\{40\}\) is the first bad commit.*/\1/p' "$T/bisect.out")
check "git bisect run names the bad commit" test "$first" = "$BAD"
[ "$first" = "$BAD" ] || cat "$T/bisect.out"
git bisect reset -q >/dev/null 2>&1

finish
