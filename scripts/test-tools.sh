#!/usr/bin/env bash
# Installs the tools the tests run as real clients, only those missing:
# kcat (Debian package) for the Kafka listener's end-to-end tests
# (cmd/logd/kafka_e2e_test.go), node and npm (Debian packages nodejs and
# npm) and the kafkajs that cmd/logd/testdata/kafkajs/package-lock.json
# pins, for cmd/logd/kafkajs_e2e_test.go; TypeScript's tsc, which
# tools/package-lock.json pins, for make lint's check of the web console's
# JavaScript (scripts/check-console.sh); systemd-analyze (Debian package
# systemd) for cmd/logd/deploy_test.go's check of the unit file; jq, which
# the tested examples of README.md and docs/guide.md use
# (cmd/logd/readme_e2e_test.go). Idempotent: npm ci runs only when
# node_modules is missing or a lock file changed since it last ran.
# `make test` runs it first. Without root or apt-get, or when npm ci fails,
# it says what is missing and goes on: those tests then skip, except under
# CI=true, where they fail.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# promtool and prometheus (Debian package prometheus) for
# deploy/prometheus's rules and the dashboard test
# (cmd/logd/observability_e2e_test.go).
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v jq >/dev/null 2>&1 || missing+=(jq)
# initdb and postgres (Debian package postgresql, which installs them
# under /usr/lib/postgresql/<version>/bin) for the outbox and inbox
# tests' throwaway server (internal/pgtest).
command -v initdb >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
# chromium (Debian package) for the web console's browser tests
# (console/browser_test.go, driven through the DevTools protocol).
command -v chromium >/dev/null 2>&1 || missing+=(chromium)

if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "test-tools: missing ${missing[*]}; install them (apt-get install ${missing[*]}) or their tests skip (fail under CI=true)" >&2
	else
		echo "test-tools: installing ${missing[*]}" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
fi
# Where systemd runs, Debian starts the packaged prometheus service on
# install, listening on every interface; the tests run their own on
# 127.0.0.1, so the packaged one is stopped and disabled.
if [[ " ${missing[*]} " == *" prometheus "* ]] && [ "$(id -u)" = 0 ] && systemctl is-active --quiet prometheus 2>/dev/null; then
	systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
# Likewise the packaged PostgreSQL cluster: the tests start their own.
if [[ " ${missing[*]} " == *" postgresql "* ]] && [ "$(id -u)" = 0 ] && systemctl is-active --quiet postgresql 2>/dev/null; then
	systemctl disable --now postgresql >/dev/null 2>&1 || true
fi

# npm packages pinned by lock files: kafkajs, and TypeScript's tsc for
# make lint's check of the web console (scripts/check-console.sh). npm ci
# runs in a directory only when its node_modules is missing or its lock
# file changed since it last ran there: the stamp in node_modules records
# the lock file's hash from the last npm ci (which empties node_modules
# first).
kafkajs=cmd/logd/testdata/kafkajs
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	echo "test-tools: no node or npm; the kafkajs tests and the console's type check skip (fail under CI=true)" >&2
	exit 0
fi
npm_ci() {
	local dir=$1 what=$2 lock stamp
	stamp=$dir/node_modules/.logd-lock.sha256
	lock=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$lock" ]; then
		return 0
	fi
	echo "test-tools: npm ci in $dir" >&2
	if (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
		echo "$lock" >"$stamp"
	else
		echo "test-tools: npm ci in $dir failed; $what skip (fail under CI=true)" >&2
	fi
}
npm_ci "$kafkajs" "the kafkajs tests"
npm_ci tools "the console's type check"
