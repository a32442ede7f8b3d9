#!/usr/bin/env bash
# Runs logd's system benchmark table (docs/performance.md) on this machine:
# real logd nodes on 127.0.0.1, driven by logctl bench, one fresh node (or
# three-node cluster) per workload.
#
#   scripts/bench-system.sh            # make bench-system: the whole table (~5 min)
#   QUICK=1 scripts/bench-system.sh    # a short pass (~1 min)
#   PEERS=1 scripts/bench-system.sh    # also ../shared/bench/peers.sh (15-20 min), with ratios
#
# It prints one aligned table, workload | rate | MB/s | p50 | p99 |
# CPU-s/1M | RSS, and the machine's limits (cores, fdatasync). rate is
# records/s (claim+ack/s for the queue); p50/p99 are per call in ms (per
# claim+ack cycle for the queue); CPU-s/1M is the user+system CPU of every
# logd of the workload (from /proc/PID/stat, summed over the nodes) per
# million records; RSS is VmRSS/VmHWM in MB after the workload (the
# largest node's of a cluster). The 3-node rows also print each node's
# CPU, so a leader and a follower can be compared.
#
# Knobs (environment):
#   QUICK=1            fewer records and shorter timed runs
#   PEERS=1            run ../shared/bench/peers.sh after logd's rows and print logd/peer ratios
#                      (REPS and ONLY pass through to it; its figures: $PEERS_OUT/results/figures.txt)
#   NODES="1 3"        which cluster sizes to run
#   ROWS="..."         which rows to run, any of: p128 consume p1k one small queue p99 e2e hold
#                      (the default; small is 1 record of 128 B per call, 64 and 1 calls in
#                      flight, whose CPU-s/1M is the nodes' CPU microseconds per call; e2e is
#                      each record's latency from produce to a consumer's long poll at half of
#                      the p128 peak, for P99_SECONDS) and curve (produce 128 B in calls of 500 with CURVE="1 2 4 8 16"
#                      calls in flight, RECORDS_CURVE records each: throughput and CPU against
#                      calls in flight)
#   P99_SECONDS=N      length of the p99-at-half-of-peak run (default 15, QUICK 4; the table in
#                      docs/performance.md uses 65)
#   RECORDS_128=N      records of the 128 B produce (default 2,000,000; QUICK 200,000)
#   RECORDS_1K=N       records of the 1 KiB produce (default 500,000; QUICK 50,000)
#   RECORDS_ONE=N      records of the one-client run (default 300,000; QUICK 30,000)
#   SECONDS_SMALL=N    length of each small-call run (default 10; QUICK 3)
#   RECORDS_QUEUE=N    records of the queue run (default 200,000; QUICK 20,000)
#   RECORDS_HOLD=N     records held in 64 partitions (default 5,000,000; QUICK 200,000)
#   BENCH_1K_CALLS="8 500"  calls in flight and records per call of the 1 KiB produce
#   PROFILE=DIR        take a CPU profile (10 s) and an execution trace (2 s) of every node during
#                      the 128 B and 1 KiB produce rows, into DIR (the rows run longer to cover them)
#   LOGD_BIN, LOGCTL_BIN  use these binaries instead of building them
#   LOGD_ARGS          extra flags for every logd
#   BENCH_TMP          where the nodes' data goes (default a fresh directory under $TMPDIR)
#
# Every logd it starts is stopped by its PID on exit (also on an error or
# an interrupt); every client run is bounded by timeout.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=${QUICK:-0}
PEERS=${PEERS:-0}
NODES=${NODES:-"1 3"}
ROWS=${ROWS:-"p128 consume p1k one small queue p99 e2e hold"}
if [ "$QUICK" = 1 ]; then
	P99_SECONDS=${P99_SECONDS:-4}
	RECORDS_128=${RECORDS_128:-200000}
	RECORDS_1K=${RECORDS_1K:-50000}
	RECORDS_ONE=${RECORDS_ONE:-30000}
	SECONDS_SMALL=${SECONDS_SMALL:-3}
	RECORDS_QUEUE=${RECORDS_QUEUE:-20000}
	RECORDS_HOLD=${RECORDS_HOLD:-200000}
	RECORDS_CURVE=${RECORDS_CURVE:-30000}
else
	P99_SECONDS=${P99_SECONDS:-15}
	RECORDS_128=${RECORDS_128:-2000000}
	RECORDS_1K=${RECORDS_1K:-500000}
	RECORDS_ONE=${RECORDS_ONE:-300000}
	SECONDS_SMALL=${SECONDS_SMALL:-10}
	RECORDS_QUEUE=${RECORDS_QUEUE:-200000}
	RECORDS_HOLD=${RECORDS_HOLD:-5000000}
	RECORDS_CURVE=${RECORDS_CURVE:-300000}
fi
CURVE=${CURVE:-"1 2 4 8 16"}
read -r ONEK_CONC ONEK_PER_CALL <<<"${BENCH_1K_CALLS:-8 500}"
PROFILE=${PROFILE:-}
LOGD_ARGS=${LOGD_ARGS:-}
HZ=$(getconf CLK_TCK)
# Bounds of each client run: a row that hangs fails the script, never the machine.
RUN_TIMEOUT=${RUN_TIMEOUT:-600}

command -v jq >/dev/null || { echo "bench-system.sh: needs jq" >&2; exit 1; }
command -v curl >/dev/null || { echo "bench-system.sh: needs curl" >&2; exit 1; }

TMP=${BENCH_TMP:-$(mktemp -d "${TMPDIR:-/tmp}/logd-bench.XXXXXX")}
mkdir -p "$TMP"
PIDS=()

log() { echo "# $(date -u +%T) $*" >&2; }

# stop_pid stops one node this script started, by its PID: TERM, then
# KILL after 15 s.
stop_pid() {
	local p=$1
	kill -TERM "$p" 2>/dev/null || return 0
	for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
	kill -KILL "$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || true
}
stop_nodes() {
	local p
	for p in "${PIDS[@]}"; do stop_pid "$p"; done
	PIDS=()
}
cleanup() {
	stop_nodes
	if [ -z "${BENCH_TMP:-}" ]; then rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- binaries
if [ -z "${LOGD_BIN:-}" ] || [ -z "${LOGCTL_BIN:-}" ]; then
	log "building logd and logctl"
	mkdir -p "$TMP/bin"
	(cd "$ROOT" && go build -o "$TMP/bin/logd" ./cmd/logd && go build -o "$TMP/bin/logctl" ./cmd/logctl)
fi
LOGD=${LOGD_BIN:-$TMP/bin/logd}
LOGCTL=${LOGCTL_BIN:-$TMP/bin/logctl}

# ---------------------------------------------------------------- ports
# A base port below Linux's ephemeral range whose node ports (API base+10(N-1),
# Raft one above) are all free.
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
BASE=
for _ in $(seq 200); do
	b=$((20000 + 10 * (RANDOM % 1100)))
	ok=1
	for off in 0 1 10 11 20 21; do
		if in_use $((b + off)); then ok=0; break; fi
	done
	if [ "$ok" = 1 ]; then BASE=$b; break; fi
done
[ -n "$BASE" ] || { echo "bench-system.sh: no free ports" >&2; exit 1; }
api() { echo "127.0.0.1:$((BASE + 10 * ($1 - 1)))"; }
raft() { echo "127.0.0.1:$((BASE + 10 * ($1 - 1) + 1))"; }

# ---------------------------------------------------------------- nodes
# start_cluster N starts a fresh N-node cluster (n1 bootstraps, the others
# join it) with its data in a fresh directory, and waits until every node
# is ready.
RUN=0
start_cluster() {
	local n=$1 i
	RUN=$((RUN + 1))
	local dir=$TMP/run$RUN
	mkdir -p "$dir"
	for i in $(seq "$n"); do
		local join=()
		if [ "$i" -gt 1 ]; then join=(--join "$(api 1)"); fi
		# shellcheck disable=SC2086 # LOGD_ARGS is a list of flags
		"$LOGD" run --node-id "n$i" --data-dir "$dir/n$i" --listen "$(api "$i")" --raft-addr "$(raft "$i")" \
			--kafka-listen "" --pprof "${join[@]}" $LOGD_ARGS >"$dir/n$i.log" 2>&1 &
		PIDS+=($!)
		wait_ready "$i" "$dir/n$i.log" || return 1
	done
}
restart_node1() { # stops node 1 of a 1-node cluster and starts it over its data
	local dir=$TMP/run$RUN
	stop_nodes
	# shellcheck disable=SC2086
	"$LOGD" run --node-id n1 --data-dir "$dir/n1" --listen "$(api 1)" --raft-addr "$(raft 1)" \
		--kafka-listen "" --pprof $LOGD_ARGS >>"$dir/n1.log" 2>&1 &
	PIDS+=($!)
	wait_ready 1 "$dir/n1.log"
}
wait_ready() {
	local i=$1 logf=$2 p=${PIDS[$(($1 - 1))]}
	for _ in $(seq 300); do
		kill -0 "$p" 2>/dev/null || { echo "n$i exited:" >&2; tail -5 "$logf" >&2; return 1; }
		curl -fsS -m 1 "http://$(api "$i")/readyz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "n$i not ready after 30 s; see $logf" >&2
	return 1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
status_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }

# ---------------------------------------------------------------- rows
# A row is "name|rate|MB/s|p50|p99|CPU-s/1M|RSS"; NOTES are printed under the table.
TABLE=()
NOTES=()
FAILED=0
declare -A RATE # row key -> records/s, for p99 at half of peak and the peer ratios

# measure KEY NAME RECORDS_FIELD -- logctl args...: runs one logctl bench
# command against n1, with CPU and memory of every node, and adds a row.
# The command's JSON is kept in $TMP/KEY.json.
measure() {
	local key=$1 name=$2
	shift 4
	local before=() p i
	for p in "${PIDS[@]}"; do before+=("$(cpu_ticks "$p")"); done
	local out=$TMP/$key.json
	if ! timeout "$RUN_TIMEOUT" "$LOGCTL" --server "$(api 1)" "$@" -o json >"$out" 2>"$TMP/$key.err"; then
		echo "row $key failed:" >&2
		cat "$TMP/$key.err" >&2
		TABLE+=("$name|FAILED|-|-|-|-|-")
		FAILED=1
		return 0
	fi
	local recs rate mbs p50 p99
	if jq -e 'has("acks_per_sec")' "$out" >/dev/null; then
		recs=$(jq .records "$out")
		rate=$(jq .acks_per_sec "$out")
		mbs=$(jq .mb_per_sec "$out")
		p50=$(jq .cycle_latency_ms.p50 "$out")
		p99=$(jq .cycle_latency_ms.p99 "$out")
	else
		recs=$(jq .records "$out")
		rate=$(jq .records_per_sec "$out")
		mbs=$(jq .mb_per_sec "$out")
		p50=$(jq .latency_ms.p50 "$out")
		p99=$(jq .latency_ms.p99 "$out")
	fi
	if ! [[ "$recs $rate $mbs $p50 $p99" =~ ^[0-9.e+\ -]+$ ]]; then
		echo "row $key: unexpected output of logctl:" >&2
		cat "$out" >&2
		TABLE+=("$name|FAILED|-|-|-|-|-")
		FAILED=1
		return 0
	fi
	local total=0 per=() rss=0 hwm=0 r h
	for i in "${!PIDS[@]}"; do
		p=${PIDS[$i]}
		local d=$(($(cpu_ticks "$p") - before[i]))
		total=$((total + d))
		per+=("n$((i + 1)) $(awk -v t="$d" -v hz="$HZ" -v n="$recs" 'BEGIN{printf "%.2f", n ? t / hz / n * 1e6 : 0}')")
		r=$(status_kb "$p" VmRSS)
		h=$(status_kb "$p" VmHWM)
		if [ "$r" -gt "$rss" ]; then rss=$r; fi
		if [ "$h" -gt "$hwm" ]; then hwm=$h; fi
	done
	local cpu
	cpu=$(awk -v t="$total" -v hz="$HZ" -v n="$recs" 'BEGIN{printf "%.2f", n ? t / hz / n * 1e6 : 0}')
	RATE[$key]=$rate
	TABLE+=("$(printf "%s|%.0f|%.1f|%.2f|%.2f|%s|%d/%d" "$name" "$rate" "$mbs" "$p50" "$p99" "$cpu" $((rss / 1024)) $((hwm / 1024)))")
	if [ "${#PIDS[@]}" -gt 1 ]; then
		NOTES+=("$name: CPU-s/1M per node (n1 leader): ${per[*]}")
	fi
	log "$name: $(printf "%.0f" "$rate")/s, CPU-s/1M $cpu"
}

# profile_nodes DIR TAG: a 10 s CPU profile and a 2 s execution trace of
# every node, in the background while a row runs.
PROF_PIDS=()
profile_nodes() {
	local tag=$1 i
	mkdir -p "$PROFILE"
	for i in $(seq "${#PIDS[@]}"); do
		(
			curl -fsS -m 30 -o "$PROFILE/$tag-n$i.cpu.pprof" "http://$(api "$i")/debug/pprof/profile?seconds=10"
			curl -fsS -m 30 -o "$PROFILE/$tag-n$i.trace" "http://$(api "$i")/debug/pprof/trace?seconds=2"
		) &
		PROF_PIDS+=($!)
	done
}
profile_wait() {
	local p
	for p in "${PROF_PIDS[@]}"; do wait "$p" || true; done
	PROF_PIDS=()
}

want() { [[ " $ROWS " == *" $1 "* ]]; }

# produce_args RECORDS SIZE CONC PER_CALL: logctl bench produce's flags.
produce_args() {
	echo bench produce --records "$1" --record-size "$2" --concurrency "$3" --records-per-call "$4"
}

run_nodes() {
	local n=$1 sfx="" sz
	if [ "$n" -gt 1 ]; then sfx=", $n nodes"; fi
	if want p128 || want consume || want p99; then
		start_cluster "$n"
		local recs=$RECORDS_128
		# A profile needs the row to last its 12 s.
		if [ -n "$PROFILE" ]; then recs=$((recs * 3)); profile_nodes "p128-${n}node"; fi
		# shellcheck disable=SC2046
		measure "p128-$n" "produce 128 B, 4 calls x 5000$sfx" records -- \
			$(produce_args "$recs" 128 4 5000) --topic bench-128 --keep
		profile_wait
		if want consume && [ "$n" = 1 ]; then
			measure "consume-$n" "consume 128 B, 8 fetches x 1000$sfx" records -- bench consume --topic bench-128 --concurrency 8
		fi
		stop_nodes
	fi
	if want p1k; then
		start_cluster "$n"
		local recs=$RECORDS_1K
		if [ -n "$PROFILE" ]; then recs=$((recs * 3)); profile_nodes "p1k-${n}node"; fi
		# shellcheck disable=SC2046
		measure "p1k-$n" "produce 1 KiB, $ONEK_CONC calls x $ONEK_PER_CALL$sfx" records -- \
			$(produce_args "$recs" 1024 "$ONEK_CONC" "$ONEK_PER_CALL")
		profile_wait
		stop_nodes
	fi
	if want one && [ "$n" = 1 ]; then
		start_cluster "$n"
		# shellcheck disable=SC2046
		measure "one-$n" "produce 128 B, 1 client x 500 in flight$sfx" records -- \
			$(produce_args "$RECORDS_ONE" 128 1 500)
		stop_nodes
	fi
	if want small; then
		start_cluster "$n"
		local c
		for c in 64 1; do
			measure "small$c-$n" "produce 128 B, 1 record/call, $c in flight$sfx" records -- \
				bench produce --records 0 --duration "${SECONDS_SMALL}s" --record-size 128 \
				--concurrency "$c" --records-per-call 1
		done
		stop_nodes
	fi
	if want queue && [ "$n" = 1 ]; then
		start_cluster "$n"
		measure "queue-$n" "queue claim+ack 128 B, 8 workers x 500$sfx" records -- \
			bench queue --records "$RECORDS_QUEUE" --workers 8 --batch 500
		stop_nodes
	fi
	if want p99 && [ -n "${RATE[p128-$n]:-}" ]; then
		start_cluster "$n"
		local half
		half=$(awk -v r="${RATE[p128-$n]}" 'BEGIN{printf "%d", r / 2}')
		# The peak's calls (5000 records) on a fixed schedule: half of the
		# peak in calls of another size would be another fraction of that
		# size's peak. Up to 16 in flight, so a late call does not hold
		# back the next ones.
		measure "p99-$n" "p99 at half of peak ($half/s, ${P99_SECONDS}s)$sfx" records -- \
			bench produce --records 0 --duration "${P99_SECONDS}s" --rate "$half" --record-size 128 \
			--concurrency 16 --records-per-call 5000
		stop_nodes
	fi
	if want e2e && [ -n "${RATE[p128-$n]:-}" ]; then
		start_cluster "$n"
		local half
		half=$(awk -v r="${RATE[p128-$n]}" 'BEGIN{printf "%d", r / 2}')
		# Each record's latency from its call's due time to a consumer's
		# long poll holding it, in the peak's calls of 5000.
		measure "e2e-$n" "produce → consumer at half of peak ($half/s, ${P99_SECONDS}s)$sfx" records -- \
			bench e2e --duration "${P99_SECONDS}s" --rate "$half" --records-per-call 5000
		stop_nodes
	fi
	if want curve; then
		start_cluster "$n"
		local c
		for c in $CURVE; do
			# shellcheck disable=SC2046
			measure "curve-$n-$c" "curve: 128 B, $c x 500 in flight$sfx" records -- \
				$(produce_args "$RECORDS_CURVE" 128 "$c" 500)
		done
		stop_nodes
	fi
	if want hold && [ "$n" = 1 ]; then
		start_cluster "$n"
		# shellcheck disable=SC2046
		measure "hold-$n" "hold $RECORDS_HOLD x 128 B in 64 partitions$sfx" records -- \
			$(produce_args "$RECORDS_HOLD" 128 4 5000) --partitions 64 --topic bench-hold --keep
		local t0 t1
		t0=$(date +%s%N)
		restart_node1
		t1=$(date +%s%N)
		local p=${PIDS[0]}
		NOTES+=("restart holding $RECORDS_HOLD records in 64 partitions: ready in $(((t1 - t0) / 1000000)) ms (stop included); then RSS $(($(status_kb "$p" VmRSS) / 1024)) MB (anon $(($(status_kb "$p" RssAnon) / 1024)), file $(($(status_kb "$p" RssFile) / 1024)))")
		stop_nodes
	fi
}

for n in $NODES; do
	log "$n node(s), data in $TMP, API from $(api 1)"
	run_nodes "$n"
done

# ---------------------------------------------------------------- machine limits
dd_rate() { # dd_rate BS COUNT: writes/s and MB/s of BS writes, each with O_DSYNC
	local o t
	o=$(timeout 60 dd if=/dev/zero of="$TMP/dd.dat" bs="$1" count="$2" oflag=dsync 2>&1 | tail -1)
	rm -f "$TMP/dd.dat"
	t=$(echo "$o" | sed -nE 's/.* ([0-9.e+-]+) s,.*/\1/p')
	awk -v t="$t" -v c="$2" -v o="$o" 'BEGIN{ if (t > 0) { printf "%.0f writes/s", c / t } }'
	echo " ($(echo "$o" | sed -nE 's/.*s, (.*)$/\1/p'))"
}
LIMITS=("cores (nproc): $(nproc)")
LIMITS+=("4 KiB write + fdatasync (dd oflag=dsync, in $TMP): $(dd_rate 4k 2000)")
LIMITS+=("1 MiB write + fdatasync (dd oflag=dsync): $(dd_rate 1M 256)")

# ---------------------------------------------------------------- peers
PEER_LINES=()

# small_peers runs the small-call peers peers.sh lacks, with the tools it
# installed, and appends their figures to its figures.txt in its format:
# S1 Redis XADD 128 B, 64 clients, no pipelining (appendfsync always);
# S2 NATS JetStream sync publish 128 B, 64 clients (sync_interval always).
small_peers() {
	local figs=${PEERS_OUT:-${TMPDIR:-/tmp}/logd-peers}/results/figures.txt
	local pbin=${PEERS_OUT:-${TMPDIR:-/tmp}/logd-peers}/bin
	local dir=$TMP/small-peers v o pid
	# About SECONDS_SMALL of each on a quiet machine (Redis ~80k/s, NATS
	# with an fsync per write a quarter of it).
	local n=$((SECONDS_SMALL * 20000))
	[ -f "$figs" ] || return 0
	mkdir -p "$dir/redis" "$dir/nats"
	if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
		log "peers: Redis XADD, 64 clients, no pipelining, appendfsync always"
		redis-server --bind 127.0.0.1 --port 16380 --protected-mode yes --dir "$dir/redis" --appendonly yes \
			--appendfsync always --save '' --daemonize no --logfile "$dir/redis.log" &
		pid=$!
		for _ in $(seq 50); do redis-cli -p 16380 ping >/dev/null 2>&1 && break; sleep 0.2; done
		v=$(head -c 128 /dev/zero | tr '\0' x)
		o=$(timeout "$RUN_TIMEOUT" redis-benchmark -h 127.0.0.1 -p 16380 -n "$n" -c 64 -P 1 --csv XADD s '*' f "$v" 2>/dev/null | tail -1 || true)
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		# redis-benchmark --csv: "test","rps","avg","min","p50","p95","p99","max"
		echo "$o" | tr -d '"' | awk -F, '$2 > 0 {printf "FIG S1 | XADD 128B, 64 clients, no pipeline | AOF appendfsync=always | msgs/s=%.0f | MB/s=%.1f | p50=%sms | p99=%sms | runs=1\n", $2, $2 * 128 / 1e6, $5, $7}' >>"$figs"
	fi
	if [ -x "$pbin/nats-server" ] && [ -x "$pbin/nats" ]; then
		log "peers: NATS JetStream sync publish, 64 clients, sync_interval always"
		printf 'listen: 127.0.0.1:14290\njetstream {\n  store_dir: "%s"\n  sync_interval: always\n}\n' "$dir/nats" >"$dir/nats.conf"
		"$pbin/nats-server" -c "$dir/nats.conf" >"$dir/nats.log" 2>&1 &
		pid=$!
		for _ in $(seq 50); do NATS_URL=nats://127.0.0.1:14290 "$pbin/nats" account info >/dev/null 2>&1 && break; sleep 0.2; done
		NATS_URL=nats://127.0.0.1:14290 timeout "$RUN_TIMEOUT" "$pbin/nats" bench js pub sync bench.small --create --storage=file \
			--replicas=1 --purge --msgs="$((n / 4))" --size=128 --clients=64 --no-progress --csv="$dir/nats.csv" >"$dir/nats-bench.txt" 2>&1 || true
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		# nats bench --csv: one row per client; the rate is their sum, the
		# latency the worst client's (as peers.sh reads it).
		if [ -s "$dir/nats.csv" ]; then
			awk -F, '!/^#/ && NF > 12 {r += $5; if ($11 > p50) p50 = $11; if ($13 > p99) p99 = $13}
				END {if (r > 0) printf "FIG S2 | JS sync publish 128B, 64 clients | file R1, sync_interval=always | msgs/s=%.0f | MB/s=%.1f | p50=%.0fus | p99=%.0fus | runs=1\n", r, r * 128 / 1e6, p50, p99}' \
				"$dir/nats.csv" >>"$figs"
		fi
	fi
}
if [ "$PEERS" = 1 ]; then
	peers=$ROOT/../shared/bench/peers.sh
	if [ ! -f "$peers" ]; then
		echo "PEERS=1: $peers not found" >&2
		exit 1
	fi
	log "peers: $peers (15-20 min)"
	bash "$peers" >"$TMP/peers.log" 2>&1 || log "peers.sh failed; see $TMP/peers.log"
	figs=${PEERS_OUT:-${TMPDIR:-/tmp}/logd-peers}/results/figures.txt
	# peer_rate ID: msgs/s of one figure of peers.sh's figures.txt.
	peer_rate() { sed -nE "s/^FIG $1 +\|.*msgs\/s=([0-9.]+).*/\1/p" "$figs" | head -1; }
	ratio() { # ratio KEY LABEL ID...: logd's rate over each peer figure's
		local k=$1 label=$2 line id pr
		shift 2
		[ -n "${RATE[$k]:-}" ] || return 0
		line="$label: logd $(printf "%.0f" "${RATE[$k]}")/s"
		for id in "$@"; do
			pr=$(peer_rate "$id")
			if [ -n "$pr" ] && [ "$pr" != 0 ]; then
				line+=", /$id $(awk -v a="${RATE[$k]}" -v b="$pr" 'BEGIN{printf "%.2f", a / b}')"
			else
				line+=", /$id -"
			fi
		done
		PEER_LINES+=("$line")
	}
	small_peers
	if [ -f "$figs" ]; then
		ratio small64-1 "1 record/call, 64 in flight (Redis XADD -c 64 -P 1 always S1; NATS sync publish, 64 clients, always S2)" S1 S2
		ratio small1-1 "1 record/call, 1 in flight (Redis XADD -c 1 -P 1 always R4; NATS sync publish, always A6)" R4 A6
		ratio p128-1 "produce 128 B (NATS N8 4 clients lazy, A8 always; Redis R1 always)" N8 A8 R1
		ratio p1k-1 "produce 1 KiB (NATS N2 lazy, A2 always; Redis R3 always)" N2 A2 R3
		ratio one-1 "one client, 500 in flight (NATS N1 lazy, A1 always; Redis R2 always)" N1 A1 R2
		ratio consume-1 "consume 128 B (NATS N3 pull; Redis R5)" N3 R5
		ratio queue-1 "queue claim+ack (NATS N7 work queue lazy, A7 always; Redis R6 always)" N7 A7 R6
		ratio p128-3 "3 nodes, produce 128 B (NATS C1 R3 lazy, C5 R3 always)" C1 C5
	else
		PEER_LINES+=("no $figs: see $TMP/peers.log")
	fi
fi

# ---------------------------------------------------------------- report
echo
echo "logd system benchmark, $(date -u +%FT%TZ), $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$([ "$QUICK" = 1 ] && echo ", QUICK")"
{
	echo "workload|rate/s|MB/s|p50 ms|p99 ms|CPU-s/1M|RSS/HWM MB"
	printf "%s\n" "${TABLE[@]}"
} | column -t -s '|' -o ' | ' -R 2,3,4,5,6
for l in "${NOTES[@]}"; do echo "  $l"; done
echo "machine:"
for l in "${LIMITS[@]}"; do echo "  $l"; done
if [ "${#PEER_LINES[@]}" -gt 0 ]; then
	echo "logd / peer (records/s, same run):"
	for l in "${PEER_LINES[@]}"; do echo "  $l"; done
fi
exit "$FAILED"
