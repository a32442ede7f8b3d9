#!/usr/bin/env bash
# Starts or stops a local three-node logd cluster for trying it out.
#
#   scripts/cluster.sh start   # bin/logd must exist (make build)
#   scripts/cluster.sh stop
#
# Node nN (N = 1..3) serves its API on 127.0.0.1:70N0 (7070, 7080, 7090)
# and Raft on 70N1; data in ./data/cluster/nN, logs in ./data/cluster/nN.log,
# PID files in ./data/cluster/nN.pid. n1 bootstraps; n2 and n3 join via n1.
set -euo pipefail

DIR=${LOGD_CLUSTER_DIR:-./data/cluster}
BIN=${LOGD_BIN:-./bin/logd}

api() { echo "127.0.0.1:70$(( $1 + 6 ))0"; }
raft() { echo "127.0.0.1:70$(( $1 + 6 ))1"; }

wait_ready() {
	for _ in $(seq 1 150); do
		if curl -fsS "http://$1/readyz" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	echo "node at $1 not ready after 30s; see $DIR/*.log" >&2
	return 1
}

start() {
	mkdir -p "$DIR"
	# A first start is sequential: n1 bootstraps, then n2 and n3 join it.
	# A restart over existing data starts every node before waiting, since
	# no node can become ready (elect a leader) without a quorum.
	fresh=1
	[ -d "$DIR/n1" ] && fresh=0
	for n in 1 2 3; do
		if [ -f "$DIR/n$n.pid" ] && kill -0 "$(cat "$DIR/n$n.pid")" 2>/dev/null; then
			echo "n$n already running (pid $(cat "$DIR/n$n.pid"))"
			continue
		fi
		join=()
		if [ "$n" != 1 ] && [ ! -d "$DIR/n$n" ]; then join=(--join "$(api 1)"); fi
		"$BIN" --node-id "n$n" --data-dir "$DIR/n$n" --listen "$(api $n)" --raft-addr "$(raft $n)" "${join[@]}" \
			>>"$DIR/n$n.log" 2>&1 &
		echo $! >"$DIR/n$n.pid"
		if [ "$fresh" = 1 ]; then
			wait_ready "$(api $n)"
		fi
		echo "n$n started: API $(api $n), Raft $(raft $n), pid $(cat "$DIR/n$n.pid")"
	done
	if [ "$fresh" = 0 ]; then
		for n in 1 2 3; do wait_ready "$(api $n)"; done
	fi
	cat <<EOT

A three-node cluster is running. Try:

  export PATH=\$PWD/bin:\$PATH
  logctl --server $(api 2) cluster status
  logctl --server $(api 2) topic create orders --partitions 3     # any node accepts writes
  logctl --server $(api 3) produce orders hello world
  logctl --server $(api 1) consume orders --from earliest
  kill -9 \$(cat $DIR/n1.pid)                                      # kill a node; the others elect a leader
  logctl --server $(api 2) cluster transfer-leadership n3
  logctl --server $(api 2) bench produce --topic bench

Stop it with: make cluster-stop   (logs in $DIR/nN.log)
EOT
}

stop() {
	for n in 1 2 3; do
		f="$DIR/n$n.pid"
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid"
			for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			echo "n$n stopped"
		fi
		rm -f "$f"
	done
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
