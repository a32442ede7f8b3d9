#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short time ($1, e.g. 3s)
# over its committed corpus (testdata/fuzz) plus new inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-3s}"
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(' "$dir"/*_test.go 2>/dev/null | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u); do
    echo "fuzz $pkg $f ($t)"
    go test -run '^$' -fuzz "^${f}\$" -fuzztime "$t" "$pkg" >/tmp/fuzz.$$.log 2>&1 || { cat /tmp/fuzz.$$.log; exit 1; }
  done
done
