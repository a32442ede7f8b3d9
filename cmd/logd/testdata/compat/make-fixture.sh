#!/usr/bin/env bash
# make-fixture.sh LOGD LOGCTL [OUT]
#
# Writes the compatibility fixture that cmd/logd/compat_e2e_test.go starts
# the current build on: a single node's data dir, written by the logd and
# logctl binaries given (built from commit 2de3d3a, the last build before the
# package layout of docs/architecture.md), packed as OUT (default
# fixture.tar.gz beside this script).
#
# The binaries are built from that commit, for example
#   git worktree add /tmp/base 2de3d3a
#   (cd /tmp/base && go build -o /tmp/base-bin/ ./cmd/logd ./cmd/logctl)
#   cmd/logd/testdata/compat/make-fixture.sh /tmp/base-bin/logd /tmp/base-bin/logctl
#
# Every input is fixed, so the records, offsets, groups and queue state are
# the same on each run; compat_e2e_test.go writes them down. Only times
# differ: the tarball holds created-ms (Unix ms when the queue's leases and
# delays were set), from which the test knows whether they have run out.
#
# The node takes a snapshot every few entries; phase 1 ends with a snapshot
# covering nearly all of it, phase 2 adds entries after it, so the new build
# restores a snapshot and replays Raft log entries over partition logs that
# already hold some of them.
set -euo pipefail

if [ $# -lt 2 ]; then
	echo "usage: $0 LOGD LOGCTL [OUT]" >&2
	exit 2
fi
LOGD=$(realpath "$1")
LOGCTL=$(realpath "$2")
OUT=$(realpath -m "${3:-$(dirname "$0")/fixture.tar.gz}")

work=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

# Two free ephemeral ports on 127.0.0.1.
ports=$(python3 - <<'EOF'
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))
EOF
)
read -r api raft <<<"$ports"

data=$work/data
"$LOGD" --data-dir "$data" --listen "127.0.0.1:$api" --raft-addr "127.0.0.1:$raft" --node-id n1 \
	--snapshot-threshold 4 --snapshot-interval 300ms --cleaner-interval 100ms >"$work/logd.log" 2>&1 &
pid=$!

ctl() { "$LOGCTL" --server "127.0.0.1:$api" "$@"; }
fail() {
	echo "make-fixture: $*" >&2
	tail -20 "$work/logd.log" >&2
	exit 1
}
# json_field NAME reads the first "NAME": number of JSON on stdin.
json_field() { grep -o "\"$1\": *[0-9]*" | head -1 | grep -o '[0-9]*$'; }
applied() { ctl status -o json | json_field applied_index; }
snapshot_index() {
	local m
	m=$(ls -d "$data"/raft/snapshots/*/ 2>/dev/null | sort | tail -1)
	if [ -z "$m" ]; then echo 0; else json_field Index <"$m/meta.json"; fi
}
# claim ARGS... claims one record of jobs/w and prints its token.
claim() { ctl queue claim jobs w --max 1 -o json "$@" | grep -o '"token":"[^"]*"' | cut -d'"' -f4; }

for _ in $(seq 100); do
	if [ "$(ctl status -o json 2>/dev/null | grep -o '"state": *"Leader"')" ]; then break; fi
	sleep 0.1
done
ctl status >/dev/null || fail "logd did not start"

# ---- phase 1 --------------------------------------------------------------

# orders: 3 partitions, 30 keyed records with headers in small segments,
# plus one keyless record on partition 1.
ctl topic create orders --partitions 3 -c retention.ms=-1 -c segment.bytes=1024 -c max.message.bytes=65536 >/dev/null
for round in 0 1; do
	for c in 0 1 2 3 4; do
		vals=()
		for j in 0 1 2; do vals+=("order-$c-$((round * 3 + j))"); done
		ctl produce orders --key "customer-$c" -H source=fixture -H "customer=$c" "${vals[@]}" >/dev/null
	done
done
ctl produce orders --partition 1 audit-no-key >/dev/null

# payments: idempotency keys with a window of a year.
ctl topic create payments --partitions 2 -c retention.ms=-1 -c idempotency.window.ms=31536000000 >/dev/null
for i in 0 1 2 3; do
	ctl produce payments --key "acct-$i" --idempotency-key "pay-$i" "{\"id\":\"pay-$i\",\"amount\":$((10 * (i + 1)))}" >/dev/null
done

# state: 4 keys written 4 times in small segments, then compacted.
ctl topic create state -c retention.ms=-1 -c segment.bytes=256 >/dev/null
for r in 0 1 2 3; do
	for k in 0 1 2 3; do ctl produce state --key "k$k" "k$k=v$r" >/dev/null; done
done
ctl topic alter state -c cleanup.policy=compact >/dev/null
for _ in $(seq 200); do
	if [ "$(ctl topic describe state -o json | json_field compacted_segments)" -gt 0 ]; then break; fi
	sleep 0.1
done
[ "$(ctl topic describe state -o json | json_field compacted_segments)" -gt 0 ] || fail "state was not compacted"

# jobs: a queue group w: j0 j1 acked, j2 in flight (12 h lease), j3 delayed
# a week, j4 dead-lettered (rejected); j6..j9 never delivered.
ctl topic create jobs -c retention.ms=-1 >/dev/null
for i in 0 1 2 3 4 5 6 7 8 9; do ctl produce jobs --partition 0 -H "job=j$i" "j$i" >/dev/null; done
ctl queue create jobs w --max-deliveries 2 --deadline-header - >/dev/null
ctl queue ack jobs w "$(claim)" "$(claim)" >/dev/null
claim --lease 12h >/dev/null
ctl queue nack jobs w "$(claim)" --delay 168h --reason later >/dev/null
ctl queue nack jobs w "$(claim)" --permanent --reason "bad amount" >/dev/null

# billing: committed offsets set by a reset.
ctl group reset-offsets billing --topic orders --to-offset 2 --execute >/dev/null

end1=$(applied)
for _ in $(seq 100); do
	if [ "$(snapshot_index)" -ge $((end1 - 3)) ]; then break; fi
	sleep 0.1
done
[ "$(snapshot_index)" -ge $((end1 - 3)) ] || fail "no snapshot near index $end1"

# ---- phase 2: entries after the snapshot ------------------------------------

date +%s%3N >"$work/created-ms"
# j5 fails twice: dead-lettered after max deliveries.
ctl queue nack jobs w "$(claim)" --delay 0s --reason "timeout 1" >/dev/null
ctl queue nack jobs w "$(claim)" --reason "timeout 2" >/dev/null
# Several values under one idempotency key: import-1-1, -2, -3.
ctl produce payments --key acct-9 --idempotency-key import-1 imp-1 imp-2 imp-3 >/dev/null
# analytics: a member reads 3 records of jobs and commits.
ctl consume jobs --group analytics --max 3 >/dev/null
for _ in $(seq 100); do
	if [ "$(ctl queue describe jobs w -o json | json_field dead_letter_records)" = 2 ]; then break; fi
	sleep 0.1
done
[ "$(ctl queue describe jobs w -o json | json_field dead_letter_records)" = 2 ] || fail "j5 not dead-lettered"

end2=$(applied)
kill -TERM "$pid"
wait "$pid" || fail "logd exited with $? after SIGTERM"
pid=
snap=$(snapshot_index)
[ "$snap" -lt "$end2" ] || fail "the last snapshot ($snap) covers every entry ($end2); run again"

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work" -czf "$OUT" data created-ms
echo "wrote $OUT: snapshot at index $snap, Raft log to $end2 ($(du -k "$OUT" | cut -f1) KiB)"
