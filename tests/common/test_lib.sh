# Shared by the shell tests (source it): pass/fail counting, check, expect,
# test_tmp, finish. The sourcing script sets P (the parity binary) and T (its
# temporary folder, or test_tmp makes it) before it calls expect.

pass=0
fail=0

# check NAME COMMAND...: one test, passed when COMMAND succeeds.
check() {
    local name=$1
    shift
    if "$@"; then echo "$name ... ok"; pass=$((pass + 1)); else echo "$name ... FAIL"; fail=$((fail + 1)); fi
}

# expect CODE PATTERN ARGS...: `parity ARGS` exits CODE within
# EXPECT_TIMEOUT seconds (120), its first stderr line matches PATTERN (a bash
# regex) and it prints at most one line besides `hint:` lines.
expect() {
    local code=$1 pat=$2
    shift 2
    timeout "${EXPECT_TIMEOUT:-120}" "$P" "$@" >"$T/out" 2>"$T/err" </dev/null
    local rc=$?
    local first
    first=$(head -n 1 "$T/err")
    if [ "$rc" = "$code" ] && [[ "$first" =~ $pat ]] && [ "$(grep -vc '^hint:' "$T/err")" -le 1 ]; then
        echo "parity $* -> $code ... ok"
        pass=$((pass + 1))
    else
        echo "parity $* -> $code ... FAIL (got $rc: $(head -c 600 "$T/err"))"
        fail=$((fail + 1))
    fi
}

# test_tmp: T, a temporary folder removed when the script exits, and the
# environment of the runs: mpirun as root allowed, passive OpenMP waiting.
test_tmp() {
    T=$(mktemp -d)
    trap 'rm -rf "$T"' EXIT
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
}

# The summary line; exits 0 when nothing failed.
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" = 0 ]
    exit
}
