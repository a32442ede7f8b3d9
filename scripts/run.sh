#!/usr/bin/env bash
# Runs one logd node in the foreground for trying it out (make run):
# bin/logd with its defaults, or what LOGD_* set (LOGD_DATA_DIR,
# LOGD_LISTEN, LOGD_RAFT_ADDR, LOGD_KAFKA_LISTEN; logd reads the same
# variables, so this checks what the node will bind).
#
# It refuses to start over a running node: a port in use (a node of
# make cluster, another make run) or a data directory that
# scripts/cluster.sh created for one of its nodes.
set -euo pipefail

BIN=${LOGD_BIN:-./bin/logd}
data=${LOGD_DATA_DIR:-./data}
listen=${LOGD_LISTEN:-127.0.0.1:7070}
raft=${LOGD_RAFT_ADDR:-127.0.0.1:7071}
kafka=${LOGD_KAFKA_LISTEN-127.0.0.1:9092}

# in_use succeeds when something accepts connections at host:port.
in_use() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

for a in "$listen" "$raft" $kafka; do
	if in_use "$a"; then
		echo "make run: refusing to start: $a is in use; another logd (make cluster's n1 uses 127.0.0.1:7070, stop it with make cluster-stop) or another program holds it" >&2
		exit 1
	fi
done
if [ -f "$data/cluster.id" ] || [ -f "$data/../cluster.id" ]; then
	echo "make run: refusing to start: $data belongs to a cluster of scripts/cluster.sh; give another LOGD_DATA_DIR" >&2
	exit 1
fi
exec "$BIN" "$@"
