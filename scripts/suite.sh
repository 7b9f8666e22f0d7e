#!/usr/bin/env bash
# The whole suite, on the stack that `python -m stack run` started for it, in two
# pytest runs at once and one after (conftest.py says which test goes where):
#   1. the tests that drive the stack's app instances, nginx or its watchers, in order;
#   2. beside them, every other test, with a test database and Redis databases of its
#      own (FLASHSALE_TEST_WORKER=1, flashsale.settings.test); its output follows the first's;
#   3. then, alone, the tests that fault a server both use, or count all it runs
#      (marked exclusive).
# The arguments go to all three; any failing fails the suite.
set -uo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-.venv/bin/python}"
beside_log="$(mktemp -t flashsale-suite-XXXXXX.log)"
trap 'rm -f "$beside_log"' EXIT

FLASHSALE_TEST_WORKER=1 "$py" -m pytest -m "not stack and not exclusive" "$@" >"$beside_log" 2>&1 &
beside_pid=$!
FLASHSALE_TEST_WORKER=0 "$py" -m pytest -m "stack and not exclusive" "$@"
first=$?
wait "$beside_pid"
beside=$?
echo
echo "----- beside them: the tests that do not drive the stack -----"
cat "$beside_log"
echo
echo "----- alone: the tests that fault a server both runs use, or count all it runs -----"
"$py" -m pytest -m exclusive "$@"
alone=$?

# 5 is pytest's "no test selected": arguments that pick none of one kind.
statuses=("$first" "$beside" "$alone")
for status in "${statuses[@]}"; do
    if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then
        exit "$status"
    fi
done
for status in "${statuses[@]}"; do
    [ "$status" -eq 0 ] && exit 0
done
exit 5
