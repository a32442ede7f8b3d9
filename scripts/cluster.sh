#!/usr/bin/env bash
# Starts or stops a local three-node logd cluster for trying it out.
#
#   scripts/cluster.sh start            # bin/logd must exist (make build)
#   scripts/cluster.sh start --secure   # TLS on the API and between nodes, --auth required
#   scripts/cluster.sh stop
#
# Node nN (N = 1..3) serves its API on 127.0.0.1:70N0 (7070, 7080, 7090),
# Raft on 70N1 and the Kafka protocol on its API port + 2022 (9092, 9102,
# 9112; each node registers its own, docs/kafka.md; over TLS with client
# certificates when --secure);
# data in ./data/cluster/nN, logs in ./data/cluster/nN.log,
# PID files in ./data/cluster/nN.pid. n1 bootstraps; n2 and n3 join via n1.
# LOGD_CLUSTER_DIR, LOGD_CLUSTER_PORT (7070: n1's API port; node N's is
# 10(N-1) above it, its Raft port one above that) and
# LOGD_CLUSTER_KAFKA_PORT (9092, the same steps) move it.
#
# Safety: a first start writes $DIR/cluster.id (the cluster's identity)
# before any node starts, and every later start requires it, so the
# script never starts or joins nodes over data it did not create. Before a
# node starts, its ports must be free: over a running node (make run,
# another cluster) it refuses and starts nothing. A node counts as running
# only if the process of its PID file is logd with its data directory,
# and stop signals only those processes.
#
# --secure first creates, with bin/logd cert, a development CA, a node
# certificate per node and an admin client certificate in
# ./data/cluster/certs (kept for later starts), and starts every node with
# them (docs/security.md). A cluster started secure stays secure: later
# starts read ./data/cluster/secure.
set -euo pipefail

DIR=${LOGD_CLUSTER_DIR:-./data/cluster}
BIN=${LOGD_BIN:-./bin/logd}
CERTS=$DIR/certs

PORT=${LOGD_CLUSTER_PORT:-7070}
KAFKA_PORT=${LOGD_CLUSTER_KAFKA_PORT:-9092}
api() { echo "127.0.0.1:$(( PORT + ($1 - 1) * 10 ))"; }
raft() { echo "127.0.0.1:$(( PORT + ($1 - 1) * 10 + 1 ))"; }
kafka() { echo "127.0.0.1:$(( KAFKA_PORT + ($1 - 1) * 10 ))"; }

# in_use succeeds when something accepts connections at host:port.
in_use() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

# running N succeeds when node N's PID file names a live logd of this
# cluster (its command line holds its data directory): a PID reused by
# another process does not count.
running() {
	local f="$DIR/n$1.pid" pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	kill -0 "$pid" 2>/dev/null || return 1
	if [ -r "/proc/$pid/cmdline" ]; then
		# This script's own fork counts too: it has not exec'd logd yet.
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -e "--data-dir $DIR/n$1 " -e "cluster.sh" || return 1
	fi
}

# refuse prints why the script will not go on, and exits.
refuse() {
	echo "cluster.sh: refusing to start: $*" >&2
	exit 1
}

secure=0
scheme=http
curl_tls=()

# wait_ready N waits until node N answers /readyz, and fails as soon as
# the process this start began is gone (then the port answering is not
# this node's). Only kill -0: right after the fork, the process may not
# have exec'd logd yet.
wait_ready() {
	for _ in $(seq 1 150); do
		if ! kill -0 "$(cat "$DIR/n$1.pid")" 2>/dev/null; then
			echo "n$1 exited; see $DIR/n$1.log:" >&2
			tail -n 5 "$DIR/n$1.log" >&2
			return 1
		fi
		if curl -fsS "${curl_tls[@]}" "$scheme://$(api "$1")/readyz" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	echo "n$1 at $(api "$1") not ready after 30s; see $DIR/n$1.log" >&2
	return 1
}

# make_certs creates what is missing of the CA, the node certificates and
# the admin's.
make_certs() {
	if [ ! -f "$CERTS/ca.crt" ]; then "$BIN" cert ca --dir "$CERTS" >/dev/null; fi
	for n in 1 2 3; do
		if [ ! -f "$CERTS/n$n.crt" ]; then "$BIN" cert node --dir "$CERTS" --id "n$n" --hosts 127.0.0.1,localhost >/dev/null; fi
	done
	if [ ! -f "$CERTS/admin.crt" ]; then "$BIN" cert client --dir "$CERTS" --name admin >/dev/null; fi
	echo "certificates in $CERTS: ca.crt, n1..n3.crt, admin.crt (and their keys)"
}

# node_flags prints the Kafka listener and the security flags of node $1.
node_flags() {
	echo --kafka-listen "$(kafka "$1")"
	if [ "$secure" = 1 ]; then
		# Peer TLS takes the API's certificate, key and CA (--peer-tls-*),
		# and so does the Kafka listener; the admin client's certificate
		# names User:admin, a superuser.
		echo --tls-cert "$CERTS/n$1.crt" --tls-key "$CERTS/n$1.key" --tls-client-ca "$CERTS/ca.crt" --auth required --superuser admin
	fi
}

# kafka_note and kafka_hint describe the Kafka listeners.
kafka_note() { echo ", Kafka $(kafka "$1")"; }
kafka_hint() {
	if [ "$secure" = 1 ]; then
		echo "  kcat -b $(kafka 1) -L -X security.protocol=ssl -X ssl.ca.location=$CERTS/ca.crt -X ssl.certificate.location=$CERTS/admin.crt -X ssl.key.location=$CERTS/admin.key"
	else
		echo "  kcat -b $(kafka 1) -L                                            # Kafka clients: any node bootstraps"
	fi
}

start() {
	# A first start is sequential: n1 bootstraps, then n2 and n3 join it.
	# A restart over existing data starts every node before waiting, since
	# no node can become ready (elect a leader) without a quorum.
	fresh=1
	if [ -f "$DIR/cluster.id" ]; then
		fresh=0
	else
		for n in 1 2 3; do
			if [ -e "$DIR/n$n" ]; then
				refuse "$DIR/n$n exists, but $DIR/cluster.id does not: this script did not create that data; move it away or give another LOGD_CLUSTER_DIR"
			fi
		done
	fi
	# Every port of a node that is not running must be free: a node of
	# make run on 127.0.0.1:7070 would otherwise take n1's place, and n2
	# and n3 would join it.
	for n in 1 2 3; do
		running "$n" && continue
		for a in "$(api $n)" "$(raft $n)" "$(kafka $n)"; do
			if in_use "$a"; then
				refuse "n$n's address $a is in use (a node of make run? stop it first); nothing was started"
			fi
		done
	done
	mkdir -p "$DIR"
	if [ "$fresh" = 1 ]; then
		echo "logd-cluster $(date -u +%Y%m%dT%H%M%SZ)-$$-$RANDOM created by scripts/cluster.sh" >"$DIR/cluster.id"
	fi
	# The step printed is the one README.md and docs/guide.md give
	# (TestClusterSecureStep).
	if [ "$fresh" = 0 ] && [ "$secure" = 1 ] && [ ! -f "$DIR/secure" ]; then
		refuse "the cluster in $DIR was started without --secure, and a cluster keeps what it started as; to start a secure one, stop it and remove its data first: make cluster-stop && rm -rf $DIR"
	fi
	[ -f "$DIR/secure" ] && secure=1
	if [ "$secure" = 1 ]; then
		make_certs
		touch "$DIR/secure"
		scheme=https
		curl_tls=(--cacert "$CERTS/ca.crt" --cert "$CERTS/admin.crt" --key "$CERTS/admin.key")
	fi
	for n in 1 2 3; do
		if running "$n"; then
			echo "n$n already running (pid $(cat "$DIR/n$n.pid"))"
			continue
		fi
		join=()
		if [ "$n" != 1 ] && [ ! -d "$DIR/n$n" ]; then join=(--join "$(api 1)"); fi
		# shellcheck disable=SC2046 # node_flags prints words without spaces
		"$BIN" --node-id "n$n" --data-dir "$DIR/n$n" --listen "$(api $n)" --raft-addr "$(raft $n)" "${join[@]}" $(node_flags $n) \
			>>"$DIR/n$n.log" 2>&1 &
		echo $! >"$DIR/n$n.pid"
		if [ "$fresh" = 1 ] && ! wait_ready "$n"; then
			echo "stopping the nodes this start began" >&2
			stop
			exit 1
		fi
		echo "n$n started: API $scheme://$(api $n), Raft $(raft $n)$(kafka_note $n), pid $(cat "$DIR/n$n.pid")"
	done
	if [ "$fresh" = 0 ]; then
		for n in 1 2 3; do wait_ready "$n" || exit 1; done
	fi
	# logctl_at N is the logctl command line for node N.
	logctl_at() { echo "logctl --server $(api "$1")"; }
	if [ "$secure" = 1 ]; then
		cat <<EOT

A secure three-node cluster is running: TLS on every API and between the
nodes, client certificates of $CERTS/ca.crt required, --auth required.
logctl and curl connect as the admin client (User:admin, a superuser):

  export LOGCTL_TLS_CA=$CERTS/ca.crt LOGCTL_TLS_CERT=$CERTS/admin.crt LOGCTL_TLS_KEY=$CERTS/admin.key
  # (or --tls-ca, --tls-cert, --tls-key on each command)
  curl ${curl_tls[*]} $scheme://$(api 1)/readyz
EOT
	fi
	cat <<EOT

A three-node cluster is running. Try:

  export PATH=\$PWD/bin:\$PATH
  $(logctl_at 2) cluster status
  $(logctl_at 2) topic create orders --partitions 3     # any node accepts writes
  $(logctl_at 3) produce orders hello world
  $(logctl_at 1) consume orders --from earliest
  kill -9 \$(cat $DIR/n1.pid)                                      # kill a node; the others elect a leader
  $(logctl_at 2) cluster transfer-leadership n3
  $(logctl_at 2) bench produce --topic bench
$(kafka_hint)

Stop it with: make cluster-stop   (logs in $DIR/nN.log)
EOT
}

# stop signals only the nodes this script started (running: their PID
# files name live logd processes of this cluster).
stop() {
	for n in 1 2 3; do
		f="$DIR/n$n.pid"
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		if running "$n"; then
			kill -TERM "$pid"
			for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			echo "n$n stopped"
		fi
		rm -f "$f"
	done
}

case "${1:-}" in
start)
	case "${2:-}" in
	"") ;;
	--secure) secure=1 ;;
	*) echo "usage: $0 start [--secure] | stop" >&2; exit 2 ;;
	esac
	start
	;;
stop) stop ;;
*) echo "usage: $0 start [--secure] | stop" >&2; exit 2 ;;
esac
