#!/usr/bin/env bash
# Runs every Go fuzz target in the module over its committed corpus
# (testdata/fuzz) plus new inputs, for $1: a count of executions (2000x)
# or a duration (60s), as go test's -fuzztime takes it.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-2000x}"
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(' "$dir"/*_test.go 2>/dev/null | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u); do
    echo "fuzz $pkg $f ($t)"
    go test -run '^$' -fuzz "^${f}\$" -fuzztime "$t" "$pkg" >/tmp/fuzz.$$.log 2>&1 || { cat /tmp/fuzz.$$.log; exit 1; }
  done
done
