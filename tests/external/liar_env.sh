# shellcheck shell=bash
# Shared by test_external.sh and test_free.sh (source it after setting P):
# Debian's python3 with numpy (else the script exits 77, skipped), T and
# TMPDIR (parity's private folders go there: a test sees what is left),
# test_lib.sh, liar MODE: the command line of ext_liar.py breaking the
# protocol one way (tagged with T, so that liars_left sees this test's own
# and not those of a test running beside it), and liars_left.
PY=/usr/bin/python3
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
$PY -c 'import numpy' 2>/dev/null || { echo "skip: no numpy for $PY"; exit 77; }
T=$(mktemp -d)
export TMPDIR=$T/tmp
mkdir -p "$TMPDIR"
trap 'rm -rf "$T"' EXIT
. "$HERE/../common/test_lib.sh"
liar() { echo "$PY $HERE/ext_liar.py $1 $T"; }
liars_left() { pgrep -f "ext_liar.py [a-z0-9]* $T\$"; }
