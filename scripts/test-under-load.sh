#!/usr/bin/env bash
# Runs the timing-sensitive packages' tests on a busy machine: a user's
# laptop or a shared CI runner is not idle, and a test that needs an idle
# machine to pass asserts how fast it could push, not what logd
# guarantees (docs/faults.md, "A suite that holds under load").
#
# LOAD (default 4) busy loops per CPU run at the tests' own priority for
# the whole run and are stopped by PID when it ends, however it ends. The
# go test timeout grows with the load. Nothing tells the tests that the
# machine is busy: no test skips itself or relaxes a check because of load.
#
#   make test-under-load                      # the default packages
#   LOAD=2 scripts/test-under-load.sh ./cmd/logd/ -run 'Abuse'
#
# Arguments, when given, replace the package list; everything after the
# packages goes to go test. After --, the arguments are a command to run
# under the same load instead of go test:
#
#   scripts/test-under-load.sh -- make test
set -euo pipefail
cd "$(dirname "$0")/.."

load=${LOAD:-4}
case $load in '' | *[!0-9]*) echo "test-under-load: LOAD must be a whole number, got '$load'" >&2; exit 2 ;; esac
cpus=$(nproc)
loops=$((load * cpus))

pids=()
stop_loops() {
	if [ ${#pids[@]} -gt 0 ]; then
		kill "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
		pids=()
	fi
}
trap stop_loops EXIT
trap 'stop_loops; exit 130' INT TERM

for _ in $(seq "$loops"); do
	# A loop of shell builtins: all CPU, no memory, no children.
	bash -c 'while :; do :; done' &
	pids+=($!)
done
echo "test-under-load: $loops busy loops ($load per CPU, $cpus CPUs), PIDs ${pids[*]}" >&2

start=$(date +%s)
status=0
if [ "${1:-}" = -- ]; then
	shift
	"$@" || status=$?
else
	if [ $# -eq 0 ]; then
		set -- ./cmd/logd/ ./replication/... ./kafka/ ./console/ ./server/
	fi
	# The go test timeout: the default run's 15 minutes, once more per
	# busy loop per CPU.
	timeout=$((15 * (load + 1)))m
	GORACE="${GORACE:-atexit_sleep_ms=0}" \
		go test -race -count=1 -timeout "$timeout" "$@" || status=$?
fi
stop_loops
echo "test-under-load: exit $status after $(($(date +%s) - start)) s under $loops busy loops" >&2
exit $status
