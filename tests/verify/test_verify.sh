#!/usr/bin/env bash
# Tests of `parity verify`, `parity lockstep` and `parity table`:
#   sign   keys and signatures (minisign formats, results.json.minisig; interop
#          with /usr/bin/minisign when installed), tampering, wrong keys,
#          failing verdicts, nested ones of a small real run (fast)
#   suite  suite-file mistakes: one "SUITE:LINE: key 'x': ..." line, exit 2 (fast)
#   fault  a suite with a deliberately broken config (--fault): exit 1, the
#          row marked FAIL with the first differing step and element, no signature
#   quick  verify/suites/quick passes, is signed, `table verify` accepts it and
#          rejects it after one flipped byte (a few minutes)
#   studies verify/suites/studies-quick passes and every case's exact configs
#          are bitwise equal to the reference, per step and in the final weights
#          (results.json); MPFR checks it cannot run are "not covered" (minutes)
#   timing the timing method on a tiny suite: the calibrated window, warm-up
#          steps, round-robin rounds, each row's statistics and speedup interval
#          recomputed from the raw runs in results.json, NOISY in the table
#          exactly where the interval says so, the per-phase medians and their
#          table, load, steal and the core-to-core probes around every run
#          (~1 min)
#   noisy  the same tiny suite beside a competing load (two busy loops, stopped
#          and started at random): at least one omp row NOISY. Statistical,
#          not certain: such a load makes every interval of 5 rounds within
#          +-10% most unlikely, but the test is labelled slow and not part of
#          the rule's proof (test_timing checks the rule on fixed vectors) (~1 min)
# Usage: test_verify.sh sign|suite|fault|quick|studies|timing|noisy PATH/TO/parity
# (needs fashion-mnist, mnist)
set -u
. "$(dirname "$0")/../common/test_lib.sh"
MODE=$1
P=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
export OMPI_MCA_btl_vader_single_copy_mechanism=none

sha() { sha256sum "$1" | cut -d' ' -f1; }
flip_byte() { # file offset: xor one byte with 1
    python3 - "$1" "$2" <<'PY'
import sys
p, k = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read()); b[k] ^= 1; open(p, 'wb').write(b)
PY
}

# A results folder whose verdicts all say VERDICT, without running anything
# (shaped as parity verify writes it: nested correctness, mpfr and report
# verdicts; an MPFR tensor without a bound is "info").
fake_results() { # dir verdict
    mkdir -p "$1"
    printf '| a | table |\n' >"$1/table.md"
    cat >"$1/results.json" <<JSON
{"format": "parity-results-1", "suite": {"name": "fake", "sha256": "00"},
 "verdict": "$2", "verdict_reason": "test",
 "cases": [{"name": "c", "configs": [{"trainer": "serial", "mode": "exact", "threads": 1,
   "ranks": 1, "correctness": {"verdict": "$2"}, "mpfr": {"verdict": "$2"}, "verdict": "$2"}],
   "checks": [{"verdict": "pass", "report": {"verdict": "PASS",
     "tensors": [{"verdict": "PASS"}, {"verdict": "info"}]}}]}],
 "files": {"table.md": "$(sha "$1/table.md")"}}
JSON
}

# set_json FILE PATH VALUE: one member of a JSON file set, PATH in Python
# subscripts (['cases'][0]['verdict']), VALUE a JSON value.
set_json() {
    python3 -c 'import json, sys
p, path, v = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
d = json.load(open(p))
exec("d" + path + " = v")
json.dump(d, open(p, "w"), indent=1)' "$1" "$2" "$3"
}

case "$MODE" in
sign)
    K=$T/keys/parity.key
    "$P" table keygen --key "$K" >"$T/out" 2>&1
    check "keygen writes a key pair" test -s "$K" -a -s "$T/keys/parity.pub"
    check "the secret key is mode 0600" test "$(stat -c %a "$K")" = 600
    "$P" table keygen --key "$K" >/dev/null 2>"$T/err"
    check "keygen refuses to overwrite (exit 2)" test $? = 2
    fake_results "$T/a" pass
    "$P" table sign "$T/a" --key "$K" >"$T/out" 2>"$T/err"
    check "sign a passing results folder into results.json.minisig" test $? = 0 -a -s "$T/a/results.json.minisig" \
        -a ! -e "$T/a/results.json.sig"
    check "... saying where" grep -qx "signed $T/a/results.json with key [0-9A-F]\{16\}: $T/a/results.json.minisig" "$T/out"
    "$P" table verify "$T/a" --pub "$T/keys/parity.pub" >"$T/out" 2>"$T/err"
    check "table verify accepts it" test $? = 0
    if [ -x /usr/bin/minisign ]; then
        # minisign's own default name: no -x needed.
        /usr/bin/minisign -Vm "$T/a/results.json" -p "$T/keys/parity.pub" >"$T/out" 2>&1
        check "minisign -Vm results.json -p KEY.pub (no -x) accepts our signature" test $? = 0
        check "... 'Signature and comment signature verified'" grep -qx "Signature and comment signature verified" "$T/out"
        /usr/bin/minisign -G -W -p "$T/ms.pub" -s "$T/ms.key" >/dev/null 2>&1
        fake_results "$T/m" pass
        "$P" table sign "$T/m" --key "$T/ms.key" >/dev/null 2>"$T/err"
        check "a key made by minisign -G -W signs with parity" test $? = 0
        "$P" table verify "$T/m" --pub "$T/ms.pub" >/dev/null 2>"$T/err"
        check "... and parity verifies it with minisign's public key" test $? = 0
        /usr/bin/minisign -Vm "$T/m/results.json" -p "$T/ms.pub" >/dev/null 2>&1
        check "... and so does minisign" test $? = 0
        rm "$T/m/results.json.minisig"
        /usr/bin/minisign -S -s "$T/ms.key" -m "$T/m/results.json" -t "by minisign" >/dev/null 2>&1
        "$P" table verify "$T/m" --pub "$T/ms.pub" >"$T/out" 2>"$T/err"
        check "parity verifies a signature made by minisign -S" test $? = 0
        /usr/bin/minisign -S -s "$K" -m "$T/m/results.json" >/dev/null 2>&1
        /usr/bin/minisign -Vm "$T/m/results.json" -p "$T/keys/parity.pub" >/dev/null 2>&1
        check "minisign signs with a key made by parity table keygen" test $? = 0
    else
        echo "minisign interop ... skipped (/usr/bin/minisign not installed; ci/setup.sh installs it)"
    fi
    # One changed byte, anywhere that matters, fails with exit 1 and one line.
    cp -r "$T/a" "$T/b"
    flip_byte "$T/b/results.json" 40
    "$P" table verify "$T/b" --pub "$T/keys/parity.pub" >"$T/out" 2>"$T/err"
    check "a flipped byte in results.json: exit 1, one line" test $? = 1 -a "$(wc -l <"$T/err")" = 1
    cp -r "$T/a" "$T/c"
    echo "| forged | row |" >>"$T/c/table.md"
    "$P" table verify "$T/c" --pub "$T/keys/parity.pub" >"$T/out" 2>"$T/err"
    check "a changed table.md fails (SHA-256 in results.json)" test $? = 1
    grep -q "table.md was changed" "$T/err"
    check "... and says which file" test $? = 0
    cp -r "$T/a" "$T/d"
    sed -i 's/^trusted comment: .*/trusted comment: forged/' "$T/d/results.json.minisig"
    "$P" table verify "$T/d" --pub "$T/keys/parity.pub" >/dev/null 2>&1
    check "a changed trusted comment fails" test $? = 1
    "$P" table keygen --key "$T/other.key" >/dev/null
    "$P" table verify "$T/a" --pub "$T/other.pub" >"$T/out" 2>"$T/err"
    check "the wrong public key fails with exit 1" test $? = 1 -a "$(wc -l <"$T/err")" = 1
    rm "$T/b/results.json.minisig"
    "$P" table verify "$T/b" --pub "$T/keys/parity.pub" >/dev/null 2>&1
    check "a missing signature fails" test $? = 1
    # A table signed before the rename: results.json.sig is still read.
    cp -r "$T/a" "$T/old"
    mv "$T/old/results.json.minisig" "$T/old/results.json.sig"
    "$P" table verify "$T/old" --pub "$T/keys/parity.pub" >"$T/out" 2>"$T/err"
    check "an older table's results.json.sig verifies" test $? = 0 -a ! -s "$T/err"
    flip_byte "$T/old/results.json" 40
    "$P" table verify "$T/old" --pub "$T/keys/parity.pub" >/dev/null 2>&1
    check "... and a flipped byte under it fails" test $? = 1
    # Failing or missing verdicts: never signed, never verified.
    fake_results "$T/f" fail
    "$P" table sign "$T/f" --key "$K" >"$T/out" 2>"$T/err"
    check "sign refuses a failed verdict (exit 1)" test $? = 1 -a ! -e "$T/f/results.json.minisig"
    grep -q "refusing to sign" "$T/err"
    check "... saying so" test $? = 0
    fake_results "$T/g" pass
    python3 - "$T/g/results.json" <<'PY'
import json, sys
p = sys.argv[1]; d = json.load(open(p))
del d['cases'][0]['configs'][0]['verdict']
json.dump(d, open(p, 'w'))
PY
    "$P" table sign "$T/g" --key "$K" >/dev/null 2>&1
    check "sign refuses a missing config verdict" test $? = 1
    # A signed table whose results.json says fail (signed by someone else's tool):
    fake_results "$T/h" fail
    /usr/bin/minisign -S -s "$T/ms.key" -m "$T/h/results.json" >/dev/null 2>&1 ||
        "$P" table sign "$T/h" --key "$K" >/dev/null 2>&1
    if [ -e "$T/h/results.json.minisig" ]; then
        "$P" table verify "$T/h" --pub "$T/ms.pub" >/dev/null 2>"$T/err"
        check "a validly signed results.json with a failed verdict does not verify" test $? = 1
    fi
    # Every verdict is recomputed, not trusted: a small real run, then one
    # nested verdict set to fail while every verdict above it still says pass.
    printf '[case tiny]\nsteps = 2\ntrainers = serial\nthreads = 1\nrepeats = 0\nwarmup = 0\ncheck_steps = first\n' >"$T/tiny"
    "$P" verify "$T/tiny" --out "$T/v" --key "$K" >"$T/out" 2>"$T/err" </dev/null
    check "a small verify run passes, signed into results.json.minisig" \
        test $? = 0 -a -s "$T/v/results.json.minisig" -a ! -e "$T/v/results.json.sig"
    if [ -x /usr/bin/minisign ]; then
        /usr/bin/minisign -Vm "$T/v/results.json" -p "$T/keys/parity.pub" >/dev/null 2>&1
        check "... and minisign -Vm results.json -p KEY.pub verifies it" test $? = 0
    fi
    # nested NAME PATH VALUE SHOWN: a copy of $T/v with PATH set to VALUE;
    # sign refuses it and, signed by minisign anyway, verify fails; both in
    # one line naming SHOWN, the path of that verdict.
    nested() {
        local d="$T/n-$1" val=$3 shown=$4 rc
        cp -r "$T/v" "$d"
        rm -f "$d/results.json.minisig"
        set_json "$d/results.json" "$2" "\"$val\""
        "$P" table sign "$d" --key "$K" >"$T/out" 2>"$T/err"
        rc=$?
        check "sign refuses $shown = '$val' (exit 1, one line naming it)" test $rc = 1 -a \
            ! -e "$d/results.json.minisig" -a \
            "$(cat "$T/err")" = "parity table sign: refusing to sign $d: results.json: $shown is '$val'"
        if [ -x /usr/bin/minisign ]; then
            /usr/bin/minisign -S -s "$K" -m "$d/results.json" >/dev/null 2>&1
            "$P" table verify "$d" --pub "$T/keys/parity.pub" >"$T/out" 2>"$T/err"
            rc=$?
            check "... signed by minisign, table verify fails (exit 1, one line naming it)" test $rc = 1 -a \
                "$(cat "$T/err")" = "parity table verify: $d: FAILED: results.json: $shown is '$val'"
        fi
    }
    nested corr "['cases'][0]['configs'][0]['correctness']['verdict']" fail \
        "cases[0].configs[0].correctness.verdict"
    nested mpfr "['cases'][0]['configs'][0]['mpfr']['verdict']" error "cases[0].configs[0].mpfr.verdict"
    nested report "['cases'][0]['checks'][0]['report']['verdict']" FAIL "cases[0].checks[0].report.verdict"
    nested tensor "['cases'][0]['checks'][1]['report']['tensors'][3]['verdict']" FAIL \
        "cases[0].checks[1].report.tensors[3].verdict"
    ;;
suite)
    # expect_suite NAME PATTERN: the suite in $T/NAME exits 2 with PATTERN in one line.
    expect_suite() {
        local name=$1 pat=$2
        "$P" verify "$T/$name" --out "$T/out-$name" --key "$T/none.key" >"$T/out" 2>"$T/err" </dev/null
        local rc=$?
        local first
        first=$(head -n 1 "$T/err")
        if [ "$rc" = 2 ] && [[ "$first" == *"$pat"* ]] && [ "$(grep -vc '^hint:' "$T/err")" = 1 ]; then
            echo "suite $name -> 2: $first ... ok"
            pass=$((pass + 1))
        else
            echo "suite $name -> 2 '$pat' ... FAIL (got $rc: $(cat "$T/err"))"
            fail=$((fail + 1))
        fi
    }
    ok='[case a]
steps = 5
trainers = serial'
    printf '%s\nstpes = 3\n' "$ok" >"$T/unknown"
    expect_suite unknown "$T/unknown:4: key 'stpes': unknown key"
    printf '%s\nbatch = -3\n' "$ok" >"$T/badint"
    expect_suite badint "$T/badint:4: key 'batch': '-3': expected an integer"
    printf '%s\nlr = fast\n' "$ok" >"$T/badlr"
    expect_suite badlr "$T/badlr:4: key 'lr': 'fast': expected a finite number > 0"
    printf '%s\nsteps = 6\n' "$ok" >"$T/dup"
    expect_suite dup "$T/dup:4: key 'steps': duplicate key in [case a] (first set on line 2)"
    printf 'steps = 5\n%s\n' "$ok" >"$T/outside"
    expect_suite outside "$T/outside:1: key 'steps': outside a section"
    printf '# no steps\n[case a]\ntrainers = serial\n' >"$T/missing"
    expect_suite missing "$T/missing:2: key 'steps': missing in [case a]"
    printf '[case a]\nsteps = 5\n' >"$T/notrainers"
    expect_suite notrainers "$T/notrainers:1: key 'trainers': missing"
    printf '[case a]\nsteps = 5\ntrainers = serial, gpu\n' >"$T/trainer"
    expect_suite trainer "$T/trainer:3: key 'trainers': 'gpu': expected one of serial, omp"
    printf '[case a]\nsteps = 5\ntrainers = reference\n' >"$T/reftr"
    expect_suite reftr "$T/reftr:3: key 'trainers': 'reference' is always run as the baseline"
    printf '%s\nmodes = exact, slow\n' "$ok" >"$T/mode"
    expect_suite mode "$T/mode:4: key 'modes': 'slow': expected exact or fast"
    printf '%s\nthreads = 1,,2\n' "$ok" >"$T/list"
    expect_suite list "$T/list:4: key 'threads': expected a list"
    printf '%s\ndtype = f16\n' "$ok" >"$T/dtype"
    expect_suite dtype "$T/dtype:4: key 'dtype': 'f16': expected f32 or f64"
    printf '%s\nmodel = cnn:1\n' "$ok" >"$T/model"
    expect_suite model "$T/model:4: key 'model': 'cnn:1': expected mlp:"
    printf '%s\ncheck_steps = first, middle\n' "$ok" >"$T/cs"
    expect_suite cs "$T/cs:4: key 'check_steps': 'middle': expected a step number"
    printf '%s\npredict = 4, 2048\n' "$ok" >"$T/pred"
    expect_suite pred "$T/pred:4: key 'predict': '2048': expected an integer from 1 to 1024"
    printf '%s\ncheck_steps = 9\n' "$ok" >"$T/cs2"
    expect_suite cs2 "$T/cs2:4: key 'check_steps': 9: expected a step from 1 to steps (5)"
    printf '%s\nfault = bogus\n' "$ok" >"$T/fault"
    expect_suite fault "$T/fault:4: key 'fault': 'bogus': expected ulp:STEP:INDEX"
    printf '%s\nepochs = 1\n' "$ok" >"$T/both"
    expect_suite both "$T/both:4: key 'epochs': give steps or epochs, not both"
    # The keys of the studies (optim and its hyperparameters, upscale, batch = full, check_steps = none).
    printf '%s\noptim = rmsprop\n' "$ok" >"$T/optim"
    expect_suite optim "$T/optim:4: key 'optim': 'rmsprop': expected sgd, momentum, nesterov or adam"
    printf '%s\noptim = momentum\nmomentum = 1.5\n' "$ok" >"$T/mom"
    expect_suite mom "$T/mom:5: key 'momentum': '1.5': expected a number from 0 to below 1"
    printf '%s\nmomentum = 0.5\n' "$ok" >"$T/momsgd"
    expect_suite momsgd "$T/momsgd:4: key 'momentum': goes with optim = momentum or nesterov (optim is sgd)"
    printf '%s\noptim = adam\nbeta1 = x\n' "$ok" >"$T/beta1"
    expect_suite beta1 "$T/beta1:5: key 'beta1': 'x': expected a number from 0 to below 1"
    printf '%s\noptim = adam\nbeta2 = -0.1\n' "$ok" >"$T/beta2"
    expect_suite beta2 "$T/beta2:5: key 'beta2': '-0.1': expected a number from 0 to below 1"
    printf '%s\noptim = adam\neps = 0\n' "$ok" >"$T/eps"
    expect_suite eps "$T/eps:5: key 'eps': '0': expected a finite number > 0"
    printf '%s\noptim = nesterov\neps = 1e-6\n' "$ok" >"$T/epsnes"
    expect_suite epsnes "$T/epsnes:5: key 'eps': goes with optim = adam (optim is nesterov)"
    printf '%s\nwindow = -1\n' "$ok" >"$T/win"
    expect_suite win "$T/win:4: key 'window': '-1': expected seconds from 0 to 600 (0: the case's steps)"
    printf '%s\nwindow = 1s\n' "$ok" >"$T/win2"
    expect_suite win2 "$T/win2:4: key 'window': '1s': expected seconds from 0 to 600"
    printf '%s\nupscale = 2000\n' "$ok" >"$T/up"
    expect_suite up "$T/up:4: key 'upscale': '2000': expected an image side from 1 to 1024"
    printf '%s\nbatch = half\n' "$ok" >"$T/bfull"
    expect_suite bfull "$T/bfull:4: key 'batch': 'half': expected an integer from 1 to 1000000 or full"
    printf '%s\ncheck_steps = none, last\n' "$ok" >"$T/csnone"
    expect_suite csnone "$T/csnone:4: key 'check_steps': 'none': expected a step number >= 1, first or last (or none alone)"
    printf '%s\nbatch = full\npredict = 4\n' "$ok" >"$T/predfull"
    expect_suite predfull "$T/predfull:5: key 'predict': the scaling model (parity model) predicts SGD steps of a numbered batch on the dataset's own images, this case has batch = full"
    printf '[case a]\nsteps = 5\ntrainers = serial\nthreads = 2\n' >"$T/noconfig"
    expect_suite noconfig "$T/noconfig:3: key 'trainers': no trainer of [case a] runs"
    printf '[suite x]\n' >"$T/section"
    expect_suite section "$T/section:1: '[suite x]': expected a section header [case NAME] or [defaults]"
    printf '%s\nprecision = 2\n' "$ok" >"$T/prec"
    expect_suite prec "$T/prec:4: key 'precision': '2': expected a relative half-width from 0 to 1"
    printf '%s\ncheck_configs = some\n' "$ok" >"$T/ccf"
    expect_suite ccf "$T/ccf:4: key 'check_configs': 'some': expected all (the reference and every config) or fast"
    # A case that names no model while another does would run the default MLP
    # under its own name: refused, naming both cases ([defaults] sets it for all).
    printf '[case cnn]\nmodel = cnn:1x28x28-c4k3-r-f-fc10\nsteps = 2\ntrainers = serial\n[case cnn-3]\nsteps = 2\ntrainers = omp\n' >"$T/nomodel"
    expect_suite nomodel "$T/nomodel:5: key 'model': missing in [case cnn-3] while [case cnn] sets it (model = cnn:1x28x28-c4k3-r-f-fc10): set it here too, or in a [defaults] section for every case"
    printf '[case a]\ndataset = mnist\nsteps = 2\ntrainers = serial\n[case b]\nsteps = 2\ntrainers = omp\n' >"$T/nods"
    expect_suite nods "$T/nods:5: key 'dataset': missing in [case b] while [case a] sets it (dataset = mnist)"
    printf '[defaults]\nsteps = 5\ntrainers = serial\n[case a]\n' >"$T/deftr"
    expect_suite deftr "$T/deftr:3: key 'trainers': belongs to a case, not to [defaults]"
    printf '[defaults]\nlr = 0\n%s\n' "$ok" >"$T/deflr"
    expect_suite deflr "$T/deflr:2: key 'lr': '0': expected a finite number > 0"
    printf '%s\n[defaults]\nlr = 0.1\n' "$ok" >"$T/deflate"
    expect_suite deflate "$T/deflate:4: [defaults]: expected once, before the first [case NAME]"
    printf '[defaults]\nsteps = 5\nsteps = 6\n%s\n' "$ok" >"$T/defdup"
    expect_suite defdup "$T/defdup:3: key 'steps': duplicate key in [defaults] (first set on line 2)"
    printf '%s\nsteps 5\n' "$ok" >"$T/noeq"
    expect_suite noeq "$T/noeq:4: 'steps 5': expected 'key = value'"
    printf '%s\n[case a]\nsteps = 1\ntrainers = omp\n' "$ok" >"$T/dupcase"
    expect_suite dupcase "$T/dupcase:4: [case a]: duplicate case name (first on line 1)"
    printf '# nothing\n' >"$T/empty"
    expect_suite empty "$T/empty:1: no [case NAME] section"
    # [defaults]: every case starts from it; a case's own key wins (here its
    # model, and epochs in place of the defaults' steps).
    printf '[defaults]\nmodel = mlp:784-16-10\nsteps = 3\ncheck_steps = none\nrepeats = 0\n[case a]\ntrainers = serial\n[case b]\nmodel = mlp:784-8-10\nepochs = 1\nbatch = 27000\ntrainers = serial\n' >"$T/defaults"
    "$P" table keygen --key "$T/d.key" >/dev/null 2>&1
    "$P" verify "$T/defaults" --out "$T/dfl" --key "$T/d.key" --quiet >/dev/null 2>"$T/err" </dev/null
    rc=$?
    check "[defaults]: passes ($(head -n 1 "$T/err"))" test $rc = 0
    python3 - "$T/dfl/results.json" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1]))['cases']
assert (a['settings']['model'], a['settings']['total_steps']) == ('mlp:784-16-10', 3), a['settings']
assert (b['settings']['model'], b['settings']['total_steps'], b['settings']['batch']) == \
    ('mlp:784-8-10', 2, 27000), b['settings']
PY
    check "[defaults]: case a runs its model and steps, case b its own model and epochs" test $? = 0
    # check_configs = fast: MPFR checks of the reference and the fast configs;
    # the exact configs take the reference's (their bits are its bits).
    printf '[case a]\nsteps = 3\ntrainers = serial, omp\nmodes = exact, fast\nthreads = 1, 2\nrepeats = 0\ncheck_steps = first\ncheck_configs = fast\n' >"$T/ccfast"
    "$P" verify "$T/ccfast" --out "$T/ccfo" --key "$T/d.key" --quiet >/dev/null 2>"$T/err" </dev/null
    rc=$?
    check "check_configs = fast: passes ($(head -n 1 "$T/err"))" test $rc = 0
    python3 - "$T/ccfo/results.json" "$T/ccfo/table.md" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))['cases'][0]
got = sorted((k['trainer'], k['mode'], k['threads']) for k in c['checks'])
assert got == [('omp', 'fast', 1), ('omp', 'fast', 2), ('reference', 'exact', 1),
               ('serial', 'fast', 1)], got
md = open(sys.argv[2]).read()
for x in c['configs']:
    m = x['mpfr']
    if x['mode'] == 'exact':
        assert m['checked_as'] == 'reference' and m['verdict'] == 'pass', m
        assert "the reference's checks" in m['detail'], m
    else:
        assert m['checked_as'] == x['trainer'] and m['verdict'] == 'pass', m
assert md.count(' | pass (= ref) | ') == 3, md
PY
    check "check_configs = fast: checks of the reference and the 3 fast configs; the 3 exact ones 'pass (= ref)'" test $? = 0
    "$P" verify "$T/nonexistent" >/dev/null 2>"$T/err"
    check "a missing suite file exits 2" test $? = 2
    "$P" verify quick --key "$T/none.key" --out "$T/o" >/dev/null 2>"$T/err"
    check "a missing signing key exits 2 before any work, with the keygen hint" \
        test $? = 2 -a "$(grep -c 'parity table keygen' "$T/err")" = 1 -a ! -e "$T/o"
    for s in quick default full studies studies-quick studies-cifar10 external-example; do
        "$P" verify "$(dirname "$0")/../../verify/suites/$s" --key "$T/none.key" --out "$T/o" >/dev/null 2>"$T/err"
        check "shipped suite $s parses (fails only for the missing key)" grep -q "no signing key" "$T/err"
    done
    # Off a terminal: one plain progress line per config and phase; --quiet: none.
    "$P" table keygen --key "$T/p.key" >/dev/null 2>&1
    printf '[case tiny]\nsteps = 2\ntrainers = serial\nthreads = 1\nrepeats = 1\nwarmup = 0\nwindow = 0\ncheck_steps = first\n' >"$T/tiny"
    "$P" verify "$T/tiny" --out "$T/p1" --key "$T/p.key" >/dev/null 2>"$T/err" </dev/null
    rc=$?   # before the $(...) below, which set $? to their own status
    check "verify off a terminal: a line per config ($(head -n 1 "$T/err"))" test $rc = 0 -a \
        "$(grep -c '^parity verify: case 1/1 tiny: task [0-9]*/[0-9]* serial exact T=1 R=1: training run (' "$T/err")" = 1 -a \
        "$(grep -c '^parity verify: case 1/1 tiny: task 1/[0-9]* reference (2 steps) (0:0' "$T/err")" = 1
    "$P" verify "$T/tiny" --out "$T/p2" --key "$T/p.key" --quiet >/dev/null 2>"$T/err" </dev/null
    check "verify --quiet: nothing on stderr" test $? = 0 -a ! -s "$T/err"
    # A long task (an MPFR check of a batch-512 step, several seconds) keeps
    # the log going: with --every 1, 'still running' lines of that task.
    printf '[case slow]\nsteps = 1\nbatch = 512\ntrainers = serial\nrepeats = 0\ncheck_steps = first\n' >"$T/slow"
    "$P" verify "$T/slow" --out "$T/p4" --key "$T/p.key" --every 1 >/dev/null 2>"$T/err" </dev/null
    rc=$?
    check "verify --every 1: a long task prints 'still running' lines ($(grep -c 'still running' "$T/err"))" \
        test $rc = 0 -a "$(grep -c '^parity verify: case 1/1 slow: task [0-9]*/[0-9]* .*MPFR.*still running after 0:0[1-9])$' "$T/err")" -ge 1
    EXPECT_TIMEOUT=20 expect 2 "^parity verify: --every 0: expected seconds >= 1$" verify "$T/slow" --every 0
    # Fast mode with adam: lockstep's bound for adam; a later step's MPFR
    # check starts from the reference's checkpoint (weights and state); an
    # MPI config is checked on its own step, under mpirun.
    printf '%s\noptim = adam\nmodes = exact, fast\ntrainers = serial, mpi\nranks = 1, 2\nwindow = 0\ncheck_steps = first, last\n' \
        "[case a]
steps = 5" >"$T/fastadam"
    "$P" verify "$T/fastadam" --out "$T/p3" --key "$T/p.key" --quiet >/dev/null 2>"$T/err" </dev/null
    rc=$?
    check "verify, optim = adam in fast mode: passes ($(head -n 1 "$T/err"))" test $rc = 0
    python3 - "$T/p3/results.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))['cases'][0]
modes = {(x['trainer'], x['mode']): x for x in c['configs']}
assert modes[('serial', 'fast')]['correctness']['method'] == 'bound', modes
assert all(x['correctness']['verdict'] == 'pass' and x['mpfr']['verdict'] == 'pass' for x in c['configs']), c['configs']
ck = {(x['trainer'], x['mode'], x['ranks'], x['step']): x for x in c['checks']}
assert ck[('mpi', 'exact', 2, 5)]['verdict'] == 'pass' and ck[('mpi', 'exact', 2, 5)]['weights_step'] == 4, ck
assert ck[('mpi', 'fast', 2, 1)]['verdict'] == 'pass', ck
assert ck[('reference', 'exact', 1, 5)]['report']['optim_update'] == 5, ck
PY
    check "... every config checked on its own trainer, step 5 of adam from the checkpoint after step 4" test $? = 0
    ;;
fault)
    "$P" table keygen --key "$T/k.key" >/dev/null
    # The same training twice; the second case's configs get a fault: layer
    # 2's chunk fold reordered at step 3, a few-ulp change (the reference
    # never gets it). (A one-ulp gradient fault, ulp:3:100, usually vanishes
    # in the rounding of w - lr g: the weights stay bitwise equal.)
    cat >"$T/suite" <<'EOF2'
[case clean]
steps = 6
trainers = serial, omp
threads = 1, 2
repeats = 1
warmup = 0
window = 0
check_steps = first

[case broken]
steps = 6
trainers = serial, omp
threads = 1, 2
repeats = 1
warmup = 0
window = 0
check_steps = first
fault = swap:3:2
EOF2
    "$P" verify "$T/suite" --out "$T/r" --key "$T/k.key" >"$T/out" 2>"$T/err"
    check "a suite with a broken config exits 1" test $? = 1
    check "... and is not signed" test ! -e "$T/r/results.json.minisig" -a ! -e "$T/r/results.json.sig" -a -s "$T/r/results.json"
    check "... but writes its table" test -s "$T/r/table.md" -a -s "$T/r/table.csv"
    grep -q '^| serial | exact | 1 | 1 | 1 | PASS |' "$T/r/table.md"
    check "the clean case's serial row passes (and is timed)" test $? = 0
    grep -q '^| serial | exact | 1 | 1 | 1 | \*\*FAIL\*\* | differs' "$T/r/table.md"
    check "the broken serial row is marked FAIL" test $? = 0
    grep -q '| differs: weights from step 3.*final layer[0-9]' "$T/r/table.md" &&
        grep -q 'serial exact T=1 R=1\*\*: weights differ from step 3' "$T/r/table.md"
    check "... naming the first step whose weights differ (3)" test $? = 0
    grep -Eq 'final weights: [0-9]+ of 235146 differ, first layer[0-9]\.(weight|bias)\[[0-9,]+\]' "$T/r/table.md"
    check "... and the first differing element of the final weights" test $? = 0
    grep -q 'NOT signed' "$T/r/table.md"
    check "table.md says it is not signed" test $? = 0
    check "table.csv marks 3 failing rows" test "$(grep -c ',fail,' "$T/r/table.csv")" = 3
    "$P" table sign "$T/r" --key "$T/k.key" >/dev/null 2>"$T/err"
    check "table sign refuses it" test $? = 1 -a ! -e "$T/r/results.json.minisig"
    # fast mode: a lockstep that catches a broken fold (a chunk's samples
    # skipped) and passes the clean run.
    "$P" lockstep --trainer omp --threads 2 --steps 5 --json >"$T/l.json" 2>"$T/err"
    check "parity lockstep: omp fast within the bound" test $? = 0
    "$P" lockstep --trainer omp --threads 2 --steps 5 --fault skip:2:0:5 --json >"$T/l.json" 2>"$T/err"
    check "parity lockstep: a skipped sample at step 2 violates the bound (exit 1)" test $? = 1
    python3 -c "import json; d=json.load(open('$T/l.json')); assert d['violations'] > 0 and d['first_violation_step'] == 2, d"
    check "... from step 2" test $? = 0
    "$P" lockstep --trainer mpi --ranks 2 --steps 3 --json >"$T/l.json" 2>"$T/err"
    check "parity lockstep --ranks 2 (relaunched under mpirun) passes" test $? = 0
    ;;
quick)
    "$P" table keygen --key "$T/k.key" >/dev/null
    suite=$(dirname "$0")/../../verify/suites/quick
    start=$(date +%s)
    "$P" verify "$suite" --out "$T/q" --key "$T/k.key" >"$T/out" 2>"$T/err"
    rc=$?
    echo "quick suite: exit $rc in $(($(date +%s) - start)) s"
    cat "$T/out" "$T/err"
    check "the quick suite passes (exit 0)" test $rc = 0
    check "... and is signed" test -s "$T/q/results.json.minisig"
    check "... with table.md, table.csv, results.json and a loss plot" \
        test -s "$T/q/table.md" -a -s "$T/q/table.csv" -a -s "$T/q/loss-mlp.png"
    "$P" table verify "$T/q" --pub "$T/k.pub" >"$T/out" 2>"$T/err"
    check "parity table verify accepts it" test $? = 0
    python3 - "$T/q/results.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d['provenance']
for k in ('git_commit', 'git_dirty', 'compiler', 'c_flags', 'cpu', 'cores', 'os', 'mpi_library',
          'mpirun_version', 'mpfr_version', 'command_line'):
    assert k in p, k
assert len(d['suite']['sha256']) == 64
ds = d['cases'][0]['dataset']['sha256']   # each IDX file, raw or .gz (data/fetch.sh keeps both)
bases = {'train-images-idx3-ubyte', 'train-labels-idx1-ubyte', 't10k-images-idx3-ubyte',
         't10k-labels-idx1-ubyte'}
assert {k[:-3] if k.endswith('.gz') else k for k in ds} == bases, ds
assert all(len(v) == 64 for v in ds.values()), ds
cf = d['cases'][0]['configs']
assert all(c['verdict'] == 'pass' for c in cf)
timed = [c for c in cf if c['timing']['timed']]
assert timed and all(len(c['timing']['seconds']) >= 1 for c in timed)
# window = 0: each run times the case's 40 steps after ceil(40 / 10) = 4 warm-up steps
assert all(c['timing']['steps'] == 40 and c['timing']['warmup_steps'] == 4 for c in timed), timed
assert 'calibration' not in d['cases'][0]['timing'], d['cases'][0]['timing']
over = [c for c in d['cases'][1]['configs']]
assert over and all(c['oversubscribed'] and not c['timing']['timed'] for c in over)
pr = d['cases'][0]['predicted']
assert [(r['mode'], r['ranks']) for r in pr['rows']] == [(m, R) for m in ('exact', 'fast') for R in (4, 64, 1024)], pr
assert all(r['seconds'] > 0 for r in pr['rows']) and pr['costs']['comm_measured'], pr
# the six measured compute points the predictions read (parity model's batches)
pts = pr['costs']['compute_points']
assert [b for b, t in pts] == [8, 16, 32, 64, 128, 256] and all(t > 0 for b, t in pts), pts
pb = pr['costs']['probe']   # 3 launches at the cores' nearest placement, or all 9
if pb['cores_near']:
    assert pb['used'] == 3 and 3 <= pb['launches'] <= 9, pb
else:
    assert pb['used'] == pb['launches'] == 9, pb
# the model's own arithmetic at R = 1: speedup 1 by definition; checked rows are the timed mpi ones
assert sorted((c['mode'], c['ranks']) for c in pr['check']) == sorted(
    (c['mode'], c['ranks']) for c in cf if c['trainer'] == 'mpi' and c['timing']['timed']), pr
PY
    check "results.json has provenance, dataset and suite hashes, raw timings, oversubscribed rows untimed, predicted rows" test $? = 0
    check "table.md marks the predicted rows" test "$(grep -c '| \*\*PREDICTED\*\* |$' "$T/q/table.md")" = 6
    check "table.md gives the six compute points the predictions read" \
        grep -q "compute, one serial step of b samples, t(8) = [0-9.]* us, .*, \
t(256) = [0-9.]* us, read off linearly between these" "$T/q/table.md"
    check "table.md gives the probe's launches" \
        grep -q "2-rank ping-pong; medians of [39] of [3-9] launches, " "$T/q/table.md"
    check "table.md says one timed run judges no noise, and gives no interval" \
        test "$(grep -c '\*\*1 timed run a config: fewer than 5, so no run is dropped (no CV, no interval).\*\*' "$T/q/table.md")" = 2 -a \
        "$(grep -c '| - | [0-9.]* (1 run: no interval) |' "$T/q/table.md")" -ge 10
    if [ -x /usr/bin/minisign ]; then
        /usr/bin/minisign -Vm "$T/q/results.json" -p "$T/k.pub" >/dev/null
        check "minisign -V accepts the quick table's signature" test $? = 0
    fi
    flip_byte "$T/q/results.json" 200
    "$P" table verify "$T/q" --pub "$T/k.pub" >"$T/out" 2>"$T/err"
    check "one flipped byte of results.json: table verify fails (exit 1, one line)" \
        test $? = 1 -a "$(wc -l <"$T/err")" = 1
    cat "$T/err"
    ;;
studies)
    # verify/suites/studies-quick, run from a folder of its own holding the
    # generated CIFAR-format data its CIFAR-10 case reads (results/cifar10-made).
    "$P" table keygen --key "$T/k.key" >/dev/null
    suite=$(cd "$(dirname "$0")/../../verify/suites" && pwd)/studies-quick
    mkdir -p "$T/results"
    (cd "$T" && "$P" data make-cifar results/cifar10-made --records 1000 >/dev/null)
    start=$(date +%s)
    (cd "$T" && "$P" verify "$suite" --out "$T/s" --key "$T/k.key" >"$T/out" 2>"$T/err")
    rc=$?
    echo "studies-quick suite: exit $rc in $(($(date +%s) - start)) s"
    cat "$T/out" "$T/err"
    check "the studies-quick suite passes (exit 0)" test $rc = 0
    check "... and is signed" test -s "$T/s/results.json.minisig"
    "$P" table verify "$T/s" --pub "$T/k.pub" >"$T/out" 2>"$T/err"
    check "parity table verify accepts it" test $? = 0
    python3 - "$T/s/results.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cases = {c['name']: c for c in d['cases']}
want = {  # case -> its exact configs (trainer, T, R), in the suite's order
    'study1': [('serial', 1, 1), ('omp', 1, 1), ('omp', 2, 1), ('mpi', 1, 1), ('mpi', 1, 2),
               ('root', 1, 1), ('root', 2, 1), ('root', 1, 2), ('root', 2, 2)],
    'study2': [('serial', 1, 1), ('omp', 1, 1), ('omp', 2, 1), ('mpi', 1, 1), ('mpi', 1, 2),
               ('hybrid', 1, 1), ('hybrid', 2, 1), ('hybrid', 1, 2), ('hybrid', 2, 2),
               ('root', 1, 1), ('root', 2, 1), ('root', 1, 2), ('root', 2, 2)],
    'study2-t4': [('omp', 4, 1)],
    'study2-r4': [('mpi', 1, 4), ('hybrid', 1, 4), ('hybrid', 2, 4)],
    'study3-784': [('serial', 1, 1), ('omp', 1, 1), ('omp', 2, 1), ('mpi', 1, 1), ('mpi', 1, 2)],
    'study3-3249': [('serial', 1, 1), ('omp', 1, 1), ('omp', 2, 1), ('mpi', 1, 1), ('mpi', 1, 2)],
    'study3-12544': [('serial', 1, 1), ('mpi', 1, 1), ('mpi', 1, 2)],
    'study4-mnist': [('serial', 1, 1), ('omp', 1, 1), ('omp', 2, 1), ('mpi', 1, 1), ('mpi', 1, 2)],
    'study4-cifar10-made': [('serial', 1, 1), ('omp', 1, 1), ('omp', 2, 1), ('mpi', 1, 1), ('mpi', 1, 2),
                            ('hybrid', 1, 1), ('hybrid', 2, 1), ('hybrid', 1, 2), ('hybrid', 2, 2)],
}
assert sorted(cases) == sorted(want), sorted(cases)
for name, cfgs in want.items():
    c = cases[name]
    got = [(e['trainer'], e['threads'], e['ranks']) for e in c['configs']]
    assert got == cfgs, (name, got)
    ref = c['reference']
    for e in c['configs']:
        assert e['mode'] == 'exact' and e['verdict'] == 'pass', (name, e)
        k = e['correctness']
        assert k['method'] == 'bitwise' and k['verdict'] == 'pass', (name, k)
        assert k['first_loss_diff_step'] == 0 and k['first_weights_diff_step'] == 0, (name, k)
        assert k['weights_equal'] is True and k['weight_digests_compared'] is True, (name, k)
        assert k['steps_compared'] == c['settings']['total_steps'] == len(ref['losses']), (name, k)
        assert e['losses'] == ref['losses'], name
s = {n: c['settings'] for n, c in cases.items()}
assert s['study1']['batch_full'] is True and s['study1']['batch'] == cases['study1']['dataset']['n_train'] == 54000
assert s['study1']['act'] == 'sigmoid' and s['study1']['steps_per_epoch'] == 1
assert [s['study3-' + k]['upscale'] for k in ('784', '3249', '12544')] == [28, 57, 112]
assert s['study4-mnist']['optim'] == 'adam' and s['study4-mnist']['lr'] == 0.001
# MPFR: every config of every case is checked (MPI ones under mpirun), but
# where the suite says check_steps = none; study 3 on the resampled images.
def checks(n): return [(k['verdict'], k['detail']) for k in cases[n]['checks']]
for n in ('study2', 'study2-t4', 'study2-r4', 'study3-784', 'study3-3249', 'study3-12544', 'study4-mnist'):
    assert checks(n) and all(v == 'pass' for v, _ in checks(n)), (n, checks(n))
    keys = {(k['trainer'], k['mode'], k['threads'], k['ranks']) for k in cases[n]['checks']}
    for e in cases[n]['configs']:
        assert (e['trainer'], e['mode'], e['threads'], e['ranks']) in keys, (n, e['trainer'], keys)
        assert e['mpfr']['verdict'] == 'pass' and e['mpfr']['checked_as'] == e['trainer'], (n, e['mpfr'])
for n in ('study1', 'study4-cifar10-made'):
    assert checks(n) == [('not covered', 'not covered: check_steps = none in the suite (no MPFR '
                          'check of this case; its configs are compared with the reference only)')], checks(n)
# adam: step 5 checked from the reference's checkpoint after step 4 (state and weights)
for k in cases['study4-mnist']['checks']:
    assert k['step'] == 5 and k['weights_step'] == 4 and k['report']['optim_update'] == 5, k
assert d['summary']['checks_not_covered'] > 0 and d['verdict'] == 'pass'
assert 'not covered' in d['verdict_reason']
# window = 0: the case's own steps after a tenth of them (at least 1) as warm-up
assert (cases['study2']['timing']['steps'], cases['study2']['timing']['warmup_steps']) == (20, 2)
assert (cases['study1']['timing']['steps'], cases['study1']['timing']['warmup_steps']) == (1, 1)
pr = cases['study2']['predicted']
assert [(r['mode'], r['ranks']) for r in pr['rows']] == [(m, R) for m in ('exact', 'fast') for R in (4, 8)], pr
assert all(r['trainer'] == 'mpi' and r['seconds'] > 0 for r in pr['rows']), pr
PY
    check "every studies-quick case's exact configs are bitwise equal to the reference (results.json)" test $? = 0
    check "table.md marks the not-covered MPFR checks of study 1 and the CIFAR CNN" \
        test "$(grep -c 'NOT COVERED' "$T/s/table.md")" = 2
    ;;
timing | noisy)
    "$P" table keygen --key "$T/k.key" >/dev/null
    # serial and omp at T = 1, 2: three timed configs; 1 untimed round, then 5.
    printf '[case t]\nsteps = 20\ntrainers = serial, omp\nthreads = 1, 2\nrepeats = 5\nwarmup = 1\nwindow = 0.2\ncheck_steps = first\n' >"$T/tiny"
    if [ "$MODE" = noisy ]; then
        # Two busy loops (one per core here), stopped and started every 0.1 to
        # 0.4 s at random by a third process: every timed window meets a
        # different share of them. Only these pids are signalled and ended.
        (while :; do :; done) &
        b1=$!
        (while :; do :; done) &
        b2=$!
        (while :; do
            kill -STOP $b1 $b2 2>/dev/null; sleep "0.$((RANDOM % 4 + 1))"
            kill -CONT $b1 $b2 2>/dev/null; sleep "0.$((RANDOM % 4 + 1))"
        done) &
        ctl=$!
        trap 'kill $ctl 2>/dev/null; kill -CONT $b1 $b2 2>/dev/null; kill $b1 $b2 2>/dev/null; rm -rf "$T"' EXIT
    fi
    start=$(date +%s)
    "$P" verify "$T/tiny" --out "$T/r" --key "$T/k.key" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    echo "tiny timing suite ($MODE): exit $rc in $(($(date +%s) - start)) s"
    if [ "$MODE" = noisy ]; then
        kill $ctl 2>/dev/null
        wait $ctl 2>/dev/null
        kill -CONT $b1 $b2 2>/dev/null
        kill $b1 $b2 2>/dev/null
    fi
    check "the tiny suite passes and is signed" test $rc = 0 -a -s "$T/r/results.json.minisig"
    grep -A8 '^| trainer | mode | T | R' "$T/r/table.md" | head -n 5
    grep '^Timing: ' "$T/r/table.md"
    grep -A6 '^Where the time goes' "$T/r/table.md"
    grep '^| core distance |' "$T/r/table.md"
    if [ "$MODE" = timing ]; then
        python3 - "$T/r/results.json" "$T/r/table.md" "$T/r/table.csv" <<'PY'
import csv, json, math, statistics, sys
d = json.load(open(sys.argv[1]))
md = open(sys.argv[2]).read().splitlines()
c = d['cases'][0]
tc = c['timing']
cal = tc['calibration']
# The window: W = ceil(0.2 s / the calibration's seconds a step), K = ceil(W / 10).
assert cal['config'] == 'serial exact T=1 R=1' and cal['warmup_steps'] == 2 and cal['steps'] == 18, cal
assert abs(cal['seconds_per_step'] - cal['seconds'] / 18) <= 1e-15 * cal['seconds_per_step'], cal
W = max(1, math.ceil(0.2 / cal['seconds_per_step']))
assert tc['steps'] == W and tc['warmup_steps'] == (W + 9) // 10, (tc, W)
assert tc['rounds'] == 5 and tc['warmup_rounds'] == 1
cf = c['configs']
labels = [(x['trainer'], x['threads']) for x in cf]
assert labels == [('serial', 1), ('omp', 1), ('omp', 2)], labels
n = len(cf)
for x in cf:
    t = x['timing']
    assert t['timed'] and len(t['seconds']) == 5 and len(t['warmup_seconds']) == 1, t
    assert t['steps'] == W and t['warmup_steps'] == tc['warmup_steps'], t
# Round-robin: timed round r is overall round r + 1 (after the untimed one);
# its n runs are runs n (r + 1) .. n (r + 1) + n - 1 of the case, one per
# config, and the round starts with config (r + 1) mod n.
for r in range(5):
    got = sorted((x['timing']['order'][r], i) for i, x in enumerate(cf))
    assert [o for o, _ in got] == list(range(n * (r + 1), n * (r + 2))), (r, got)
    assert got[0][1] == (r + 1) % n, (r, got)
# Each row's statistics from its raw runs: median; 5 runs, so the fastest and
# slowest dropped; CV = sample sd / mean of the 3 kept (information only).
for x in cf:
    t = x['timing']
    s = sorted(t['seconds'])
    assert t['median'] == s[2] and t['min'] == s[0] and t['max'] == s[4], t
    kept = s[1:4]
    cv = statistics.stdev(kept) / statistics.mean(kept)
    assert t['runs_kept'] == 3 and abs(t['cv'] - cv) <= 1e-9 * cv, (t['cv'], cv)
    assert t['rounds'] == [0, 1, 2, 3, 4] and len(t['near']) == 5, t
    assert len(t['core_round_trip_ns']) == 5 and all(len(p) == 2 for p in t['core_round_trip_ns'])
# Speedups: the median over the rounds of serial's run / the row's run of the
# same round (every round here: of 5 rounds, a placement holds 5 only when it
# holds them all); the interval holds it and lies within what any resample
# can give; NOISY exactly when its half-width is over 10%.
base = cf[0]['timing']
for x in cf:
    t = x['timing']
    assert t['speedup_rounds'] == 5 and t['speedup_placement'] == 'all', t
    per_round = [b / s for b, s in zip(base['seconds'], t['seconds'])]
    assert abs(t['speedup'] - statistics.median(per_round)) <= 1e-12 * t['speedup'], t
    lo, hi = t['speedup_ci95']
    assert lo <= t['speedup'] <= hi, t
    assert min(per_round) - 1e-12 <= lo and hi <= max(per_round) + 1e-12, (t, per_round)
    assert t['speedup_significant'] == (lo > 1 or hi < 1), t
    hw = (hi - lo) / 2 / t['speedup']
    assert abs(t['speedup_half_width'] - hw) <= 1e-12 and t['noisy'] == (hw > 0.10), t
assert cf[0]['timing']['speedup_ci95'] == [1, 1], cf[0]['timing']
# The table: the runs, the CV; NOISY with the interval where it is too wide,
# else the speedup with its interval; the timing sentence.
rows = [l for l in md if l.startswith('| serial | exact') or l.startswith('| omp | exact')]
rows = [l for l in rows if l.count(' | ') == 14]   # the configs' rows (15 columns), not the MPFR checks'
assert len(rows) == 3, rows
for x, row in zip(cf, rows):
    t = x['timing']
    cells = [v.strip() for v in row.strip('|').split('|')]
    assert cells[8] == '5' and cells[12] == '%.1f%%' % (100 * t['cv']), (cells, t['cv'])
    lo, hi = t['speedup_ci95']
    if x['trainer'] == 'serial':
        assert cells[13] == '1.00 (baseline)', cells
    elif t['noisy']:
        assert cells[13] == '**NOISY** [%.2f, %.2f]' % (lo, hi) and cells[14] == '-', cells
    else:
        want = '%.2f [%.2f, %.2f]%s' % (t['speedup'], lo, hi, '' if t['speedup_significant'] else ' n.s.')
        assert cells[13] == want, (cells, want)
assert any(l.startswith('Timing: 5 rounds after 1 untimed, configs interleaved') and
           ' then times %d steps' % W in l for l in md), md
assert any(l.startswith('| load | load average (1, 5, 15 min) ') for l in md)
# Provenance and the case: load averages (3 numbers) before and after, steal.
p = d['provenance']
for o in (p, tc):
    for k in ('load_average_start', 'load_average_end'):
        assert len(o[k]) == 3 and all(v >= 0 for v in o[k]), (k, o[k])
assert p['steal_percent_timed'] >= 0 and tc['steal_percent'] >= 0, (p, tc)
# one reading of the runnable tasks before each of the 6 rounds x 3 configs
assert tc['others_runnable_samples'] == 18 and tc['others_runnable_mean'] >= 0, tc
assert tc['rounds'] == 5 and tc['rounds_max'] == 5 and tc['precision'] == 0, tc
# Phases: each timed run's phase_seconds (8 phases, none negative) add up to
# its seconds; each row's phase medians are the medians of those runs; the
# "where the time goes" table prints them in ms per step (step: the median).
names = ['batch', 'forward', 'backward', 'weight_grads', 'communication', 'update', 'log', 'other']
i = md.index(next(l for l in md if l.startswith('Where the time goes, in ms per step')))
assert md[i + 2] == '| trainer | mode | T | R | step | ' + ' | '.join(names) + ' |', md[i + 2]
for x, row in zip(cf, md[i + 4:i + 7]):
    t = x['timing']
    assert len(t['phase_seconds']) == 5, t
    for ph, sec in zip(t['phase_seconds'], t['seconds']):
        assert sorted(ph) == sorted(names) and all(v >= 0 for v in ph.values()), ph
        assert abs(sum(ph.values()) - sec) <= 1e-12 * sec, (ph, sec)
    med = t['phase_median_seconds']
    assert list(med) == names, med
    for k in names:
        assert med[k] == statistics.median(ph[k] for ph in t['phase_seconds']), (k, med, t)
    want = '| %s | exact | %d | %d | %.3f | %s |' % (x['trainer'], x['threads'], x['ranks'],
        1e3 * t['median'] / W, ' | '.join('%.3f' % (1e3 * med[k] / W) for k in names))
    assert row == want, (row, want)
assert md[i + 7] == '', md[i + 7]
# The core-to-core round trip: one probe before each of the 18 runs (6
# rounds x 3 configs) and one after the last, finite on a machine with two
# CPUs to pin to; a timed run's "after" is the next run's "before";
# provenance sums them up; the header says the range (and whether the
# distance changed); a run is near unless a probe around it is over twice
# the fastest.
probes = tc['core_round_trip_ns']
assert len(probes) == 19, probes
runs = sorted((o, i, k) for i, x in enumerate(cf) for k, o in enumerate(x['timing']['order']))
for o, i, k in runs:
    assert cf[i]['timing']['core_round_trip_ns'][k] == [probes[o], probes[o + 1]], (o, i, k)
fast = min(v for v in probes if v is not None) if any(v is not None for v in probes) else None
for x in cf:
    for (a, b), nr in zip(x['timing']['core_round_trip_ns'], x['timing']['near']):
        assert nr == (fast is None or not any(v is not None and v > 2 * fast for v in (a, b))), x
import os
if len(os.sched_getaffinity(0)) >= 2:
    assert all(v is not None and 0 < v < 100000 for v in probes), probes
ns = sorted(v for v in probes if v is not None)
rt = p['core_round_trip_ns']
assert rt['probes'] == 19 and rt['measured'] == len(ns), rt
if ns:
    far = sum(v > 2 * ns[0] for v in ns) if ns[-1] > 2 * ns[0] else 0
    assert (rt['min'], rt['median'], rt['max'], rt['far']) == (ns[0], statistics.median(ns),
                                                               ns[-1], far), rt
    head = '| core distance | core-to-core round trip %.0f-%.0f ns during the timings (median ' \
           '%.0f, %d probes)' % (ns[0], ns[-1], rt['median'], len(ns))
    if far:
        head += ": the cores' distance changed (far, over twice the fastest, in %d of %d " \
                'probes); two-core rows timed while far are slower' % (far, len(ns))
    assert head + ' |' in md, (head, [l for l in md if l.startswith('| core distance')])
    print('core-to-core round trip: %s ns' % ', '.join('%.0f' % v for v in probes))
rows = list(csv.DictReader(open(sys.argv[3])))
assert [r['noisy'] for r in rows] == [('yes' if x['timing']['noisy'] else 'no') for x in cf], rows
assert all(float(r['speedup_ci95_lo']) <= float(r['speedup']) <= float(r['speedup_ci95_hi']) for r in rows)
assert all(int(r['runs']) == 5 and int(r['window_steps']) == W for r in rows), rows
# The phase columns: each phase's median over the row's runs (recomputed from
# the raw phase_seconds), in ms per step.
for r, x in zip(rows, cf):
    for name in ('batch', 'forward', 'backward', 'weight_grads', 'communication', 'update',
                 'log', 'other'):
        want = 1e3 * statistics.median(p[name] for p in x['timing']['phase_seconds']) / W
        assert abs(float(r[name + '_ms']) - want) <= 5e-7 + 1e-6 * want, (name, r, want)
print('window %d steps after %d; CV %s' % (W, tc['warmup_steps'],
      ', '.join('%.1f%%' % (100 * x['timing']['cv']) for x in cf)))
PY
        check "the window, the rounds, each row's statistics and interval, and the table agree with the raw runs" test $? = 0
        # Adaptive rounds (precision 0.5, at most 8 rounds): every row runs 5
        # to 8 rounds, serial exact as many as the longest other row, and a
        # row that stopped early has, as the table computes it at the end, an
        # interval within +-50% (a row is looked at again every round).
        printf '[case t]\nsteps = 20\ntrainers = serial, omp\nthreads = 1, 2\nrepeats = 8\nwarmup = 0\nwindow = 0.1\ncheck_steps = first\nprecision = 0.5\n' >"$T/adapt"
        "$P" verify "$T/adapt" --out "$T/a" --key "$T/k.key" >"$T/aout" 2>"$T/aerr" </dev/null
        rc=$?
        python3 - "$T/a/results.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))['cases'][0]
assert c['timing']['precision'] == 0.5 and c['timing']['rounds_max'] == 8, c['timing']
cf = c['configs']
runs = [len(x['timing']['seconds']) for x in cf]
assert cf[0]['trainer'] == 'serial' and all(5 <= n <= 8 for n in runs), runs
assert runs[0] == max(runs[1:]), runs
for x in cf[1:]:
    t = x['timing']
    assert len(t['seconds']) == 8 or t['speedup_half_width'] <= 0.5, t
print('adaptive rounds run per row: %s' % runs)
PY
        prc=$?
        check "adaptive rounds: 5 to 8 a row, serial exact as long as any, a row stopped early within +-50%" \
            test $rc = 0 -a $prc = 0
    else
        python3 - "$T/r/results.json" <<'PY'
import json, sys
cf = json.load(open(sys.argv[1]))['cases'][0]['configs']
print('under the load: ' + ', '.join('%s T=%d CV %.1f%% half-width %s' % (x['trainer'],
      x['threads'], 100 * x['timing']['cv'], '%.1f%%' % (100 * x['timing']['speedup_half_width'])
      if 'speedup_half_width' in x['timing'] else '-') for x in cf))
assert any(x['timing'].get('noisy') for x in cf), [x['timing'] for x in cf]
PY
        check "beside a competing load, at least one row is NOISY (results.json)" test $? = 0
        check "... and the table prints NOISY in its speedup column" \
            test "$(grep -c '^| omp | exact | .* | \*\*NOISY\*\* \[[0-9.]*, [0-9.]*\] | - |$' "$T/r/table.md")" -ge 1
    fi
    ;;
*)
    echo "usage: test_verify.sh sign|suite|fault|quick|studies|timing|noisy PATH/TO/parity" >&2
    exit 2
    ;;
esac
finish
