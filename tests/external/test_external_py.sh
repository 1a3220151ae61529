#!/usr/bin/env bash
# parity_ext, the Python side of the step protocol (python/): its unit tests
# and its examples driven through python/tests/fake_parity.py, with Debian's
# Python and stdlib unittest. PATTERN picks the test files (default all);
# MODULE... must import or the test is skipped (77), numpy always.
# Usage: test_external_py.sh PATH/TO/parity [PATTERN [MODULE...]]
set -u
PY=/usr/bin/python3
pattern=${2:-test_*.py}
for mod in numpy "${@:3}"; do
    if ! $PY -c "import $mod" 2>/dev/null; then
        echo "skip: python module $mod is not installed (ci/setup.sh --ci installs it)"
        exit 77
    fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$(dirname "$0")/../.."
PARITY=$(realpath "$1") exec $PY -m unittest discover -s python/tests -p "$pattern"
