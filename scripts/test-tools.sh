#!/usr/bin/env bash
# Installs the tools the tests run as real clients, only those missing:
# kcat (Debian package) for the Kafka listener's end-to-end test
# (cmd/logd/kafka_e2e_test.go). Idempotent; `make test` runs it first.
# Without root or apt-get it says what is missing and goes on: that test
# then skips, except under CI=true, where it fails.
set -euo pipefail

missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "test-tools: missing ${missing[*]}; install them (apt-get install ${missing[*]}) or their tests skip (fail under CI=true)" >&2
	exit 0
fi
echo "test-tools: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
