// Command logd runs a logd server node. With no flags it runs a
// single-node cluster on 127.0.0.1 with its data in ./data. logd cert
// creates a development CA and the certificates of nodes and clients
// (cert.go, docs/security.md).
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/logd-dev/logd/internal/buildinfo"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/cleaner"
	"github.com/logd-dev/logd/replication/raftstore"
	"github.com/logd-dev/logd/server"
	"github.com/spf13/pflag"
)

// config is logd's configuration: each flag from the command line, else
// its LOGD_* variable, else the --config file, else its default
// (config.go).
type config struct {
	dataDir        string
	listen         string
	raftAddr       string
	raftAdvertise  string
	advertise      string
	join           string
	nodeID         string
	logLevel       string
	raftLogLevel   string
	logFormat      string
	fsync          string
	pprof          bool
	snapshotEvery  uint64
	snapshotPeriod time.Duration
	// cleanerInterval is how often the leader plans retention and
	// compaction.
	cleanerInterval time.Duration
	// cleanerIO bounds the compaction preparation's I/O (bytes/s, 0:
	// unbounded).
	cleanerIO int64
	// moveRate is --move-bytes-per-second: the segment bytes per second
	// this node copies from peers to build or catch up its replicas (0:
	// unbounded).
	moveRate int64
	// raftHeartbeat, raftElection and raftLease are Raft's timeouts; 0
	// takes replication's defaults.
	raftHeartbeat, raftElection, raftLease time.Duration
	// raftLogStore is --raft-log-store: boltdb, wal, or empty for the
	// data dir's own (replication.Config.RaftLogStore).
	raftLogStore string
	// walSegmentBytes is --raft-wal-segment-size.
	walSegmentBytes int64
	// dataGroupsPerNode is --data-groups-per-node, replicationFactor
	// --replication-factor (replication.Config's).
	dataGroupsPerNode, replicationFactor int
	// dataGroupsDefault is set when --data-groups-per-node was not given
	// (flag, variable or file): an existing cluster without data groups
	// then keeps its topics in the meta group
	// (replication.Config.DataGroupsPerNodeIsDefault).
	dataGroupsDefault bool
	// deadNodeTimeout is --dead-node-timeout.
	deadNodeTimeout time.Duration
	// maxMoves is --max-moves.
	maxMoves int
	// trailingLogs is --raft-trailing-logs.
	trailingLogs uint64
	// memoryLimit is --memory-limit: the Go runtime's soft memory limit
	// in bytes, 0 for none of logd's (memory.go).
	memoryLimit int64
	// limits bounds what clients may cost the node (httpserver.go).
	limits limitConfig
	// tls is transport security and --auth (tls.go).
	tls tlsConfig
	// plaintextWarning says what --insecure-allow-plaintext let the node
	// serve without TLS or authentication; run logs it.
	plaintextWarning string
	// peerRoutes is where this node dials its peers (peer.ParseRoutes),
	// from LOGD_PEER_ROUTES only: a test puts its fault proxies there, so
	// it is not a flag users see.
	peerRoutes peer.Routes
	// authn is who may call the node and what they may cost it
	// (auth_flags.go).
	authn authConfig
	// kafka is the Kafka-protocol listener (kafka.go).
	kafka kafkaConfig
	// peer is the listener for calls between nodes (peer_listen.go).
	peer peerListenConfig
	// effective is every flag's value and where it came from, a URL's
	// password redacted (config.go), which run logs at start.
	effective []any
}

// defineFlags registers every flag of logd run on fs and returns the
// function that, once fs is parsed, layers the environment and the
// configuration file under the command line (config.go) and reads the
// result into a config.
func defineFlags(fs *pflag.FlagSet) func(getenv func(string) string) (config, error) {
	var c config
	fs.String(configFlag, "", "YAML file of flag values, keyed by the flags' names (docs/guide.md, Configuration); flags and LOGD_* variables override it (LOGD_CONFIG)")
	fs.StringVar(&c.dataDir, "data-dir", "./data", "data directory (LOGD_DATA_DIR)")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7070", "client API, /metrics, /healthz, /readyz address (LOGD_LISTEN)")
	fs.StringVar(&c.raftAddr, "raft-addr", "127.0.0.1:7071", "Raft listen address (LOGD_RAFT_ADDR)")
	fs.StringVar(&c.raftAdvertise, "raft-advertise", "", "Raft address peers use; default --raft-addr (LOGD_RAFT_ADVERTISE)")
	fs.StringVar(&c.nodeID, "node-id", "n1", "Raft node id (LOGD_NODE_ID)")
	fs.StringVar(&c.advertise, "advertise", "", "client API address other nodes and clients use; default the --listen address (LOGD_ADVERTISE)")
	fs.StringVar(&c.join, "join", "", "client API address (or --peer-advertise address) of any cluster member to join; without it a node with no state bootstraps a single-node cluster (LOGD_JOIN)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error (LOGD_LOG_LEVEL)")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json (LOGD_LOG_FORMAT)")
	fs.StringVar(&c.raftLogLevel, "raft-log-level", "warn", "hashicorp/raft's own lines: off, error, warn, info (elections, snapshots installed), debug or trace (LOGD_RAFT_LOG_LEVEL)")
	fs.StringVar(&c.fsync, "fsync", "raft", "raft: fsync the Raft log before every commit, partition logs at snapshots; always: also fsync partition logs on every append (LOGD_FSYNC)")
	fs.StringVar(&c.raftLogStore, "raft-log-store", "", "where Raft's log is kept: boltdb or wal; default the store the data dir's Raft log is in, else "+
		raftstore.DefaultLogStore+" for a new one; naming the other store of an existing data dir is refused (docs/operations.md) (LOGD_RAFT_LOG_STORE)")
	fs.BoolVar(&c.pprof, "pprof", false, "serve /debug/pprof/ on the client port (LOGD_PPROF=true)")
	fs.Int64Var(&c.walSegmentBytes, "raft-wal-segment-size", raftstore.DefaultWALSegmentBytes, "bytes of one raft-wal segment file (wal log store): after a snapshot Raft's log is cut by whole sealed segments, so smaller ones free disk sooner and leave a lagging follower fewer entries to replay instead of a snapshot; from 64KiB to 1GiB (LOGD_RAFT_WAL_SEGMENT_SIZE)")
	fs.Int64Var(&c.memoryLimit, "memory-limit", 0, memoryLimitHelp)
	fs.IntVar(&c.dataGroupsPerNode, "data-groups-per-node", replication.DefaultDataGroupsPerNode, fmt.Sprintf("Raft data groups each node adds to the cluster beside the meta group, over which new topics' partitions are placed: it starts with that many and each join adds as many; 0 to %d; 0: none, every partition in the meta group. Unset, a cluster that holds topics and has no data groups (one from before them) keeps it so (docs/operations.md, \"Data groups\") (LOGD_DATA_GROUPS_PER_NODE)", replication.MaxDataGroupsPerNode))
	fs.IntVar(&c.replicationFactor, "replication-factor", replication.DefaultReplicationFactor, "replicas of each data group, fewer while the cluster has fewer nodes (LOGD_REPLICATION_FACTOR)")
	fs.IntVar(&c.maxMoves, "max-moves", replication.DefaultMaxMoves, "how many data group replica moves the meta leader's balancing keeps in flight at once; -1 switches balancing off (joins, drains, removals and dead nodes still move replicas) (LOGD_MAX_MOVES)")
	fs.DurationVar(&c.deadNodeTimeout, "dead-node-timeout", replication.DefaultDeadNodeTimeout, "how long the meta leader goes without hearing a member before it rebuilds the member's data group replicas on other nodes; 0: never (LOGD_DEAD_NODE_TIMEOUT)")
	fs.Uint64Var(&c.snapshotEvery, "snapshot-threshold", 8192, "Raft entries between snapshots (LOGD_SNAPSHOT_THRESHOLD)")
	fs.Uint64Var(&c.trailingLogs, "raft-trailing-logs", 512, "Raft entries kept after a snapshot for followers behind it; one further behind installs the snapshot and fetches segments from a peer (LOGD_RAFT_TRAILING_LOGS)")
	fs.DurationVar(&c.snapshotPeriod, "snapshot-interval", 30*time.Second, "how often to check for a snapshot (LOGD_SNAPSHOT_INTERVAL)")
	fs.DurationVar(&c.cleanerInterval, "cleaner-interval", cleaner.DefaultInterval,
		"how often the leader applies retention and compaction (LOGD_CLEANER_INTERVAL)")
	fs.Int64Var(&c.cleanerIO, "cleaner-io-max-bytes-per-second", cleaner.DefaultIOBytesPerSec,
		"bound on the compaction preparation's reads plus writes, bytes/s; 0 unbounded (LOGD_CLEANER_IO_MAX_BYTES_PER_SECOND)")
	fs.Int64Var(&c.moveRate, "move-bytes-per-second", catchup.DefaultMoveBytesPerSecond,
		"bound on the segment bytes this node reads from peers to build or catch up its replicas (a moved data group replica, a join, a snapshot install), all groups together, bytes/s; "+
			"higher rebuilds replicas sooner, lower leaves clients more disk and network; 0 unbounded (LOGD_MOVE_BYTES_PER_SECOND)")
	raftTimeouts := []struct {
		name, env, help string
		def             time.Duration
		to              *time.Duration
	}{
		{"raft-heartbeat-timeout", "LOGD_RAFT_HEARTBEAT_TIMEOUT",
			"silence from the leader after which a follower stands for election; shorter fails over faster, but calls elections when a busy node stalls that long", replication.DefaultHeartbeatTimeout, &c.raftHeartbeat},
		{"raft-election-timeout", "LOGD_RAFT_ELECTION_TIMEOUT", "a candidate's wait before it retries an election; 0: the heartbeat timeout", 0, &c.raftElection},
		{"raft-leader-lease-timeout", "LOGD_RAFT_LEADER_LEASE_TIMEOUT", "a leader cut off from a majority this long steps down; at most the heartbeat timeout; 0: the heartbeat timeout", 0, &c.raftLease},
	}
	for _, f := range raftTimeouts {
		fs.DurationVar(f.to, f.name, f.def, f.help+" ("+f.env+")")
	}
	readLimits := addLimitFlags(fs)
	readAuth := addAuthFlags(fs)
	readTLS := addTLSFlags(fs)
	readKafka := addKafkaFlags(fs)
	readPeer := addPeerListenFlags(fs)
	return func(getenv func(string) string) (config, error) {
		src, err := layerSources(fs, getenv)
		if err != nil {
			return c, err
		}
		c.effective = effectiveConfig(fs, src)
		if c.limits, err = readLimits(); err != nil {
			return c, err
		}
		if c.authn, err = readAuth(); err != nil {
			return c, err
		}
		if c.tls, err = readTLS(); err != nil {
			return c, err
		}
		configured := func(name string) bool { return src[name] != sourceDefault }
		if c.kafka, err = readKafka(configured, c.authn.mode == authRequired, c.tls); err != nil {
			return c, err
		}
		if c.peer, err = readPeer(); err != nil {
			return c, err
		}
		if c.snapshotEvery == 0 {
			return c, errors.New("--snapshot-threshold: want a positive integer, got 0")
		}
		if c.snapshotPeriod <= 0 {
			return c, fmt.Errorf("--snapshot-interval: want a positive duration, got %s", c.snapshotPeriod)
		}
		if c.cleanerInterval <= 0 {
			return c, fmt.Errorf("--cleaner-interval: want a positive duration, got %s", c.cleanerInterval)
		}
		if c.memoryLimit < 0 {
			return c, fmt.Errorf("--memory-limit: want a number of bytes >= 0, got %d", c.memoryLimit)
		}
		if c.cleanerIO < 0 {
			return c, fmt.Errorf("--cleaner-io-max-bytes-per-second: want a byte rate >= 0, got %d", c.cleanerIO)
		}
		if c.moveRate < 0 {
			return c, fmt.Errorf("--move-bytes-per-second: want a byte rate >= 0, got %d", c.moveRate)
		}
		for _, f := range raftTimeouts {
			if *f.to < 0 || f.def > 0 && *f.to == 0 {
				return c, fmt.Errorf("--%s: want a positive duration, got %s", f.name, *f.to)
			}
		}
		if c.peerRoutes, err = peer.ParseRoutes(getenv("LOGD_PEER_ROUTES")); err != nil {
			return c, fmt.Errorf("LOGD_PEER_ROUTES: %w", err)
		}
		switch c.fsync {
		case "raft", "always":
		default:
			return c, fmt.Errorf("--fsync: want raft or always, got %q", c.fsync)
		}
		if c.walSegmentBytes < raftstore.MinWALSegmentBytes || c.walSegmentBytes > raftstore.MaxWALSegmentBytes {
			return c, fmt.Errorf("--raft-wal-segment-size: want %d to %d bytes, got %d", raftstore.MinWALSegmentBytes, raftstore.MaxWALSegmentBytes, c.walSegmentBytes)
		}
		if c.replicationFactor < 1 {
			return c, fmt.Errorf("--replication-factor: want 1 or more, got %d", c.replicationFactor)
		}
		c.dataGroupsDefault = !configured("data-groups-per-node")
		if c.dataGroupsPerNode < 0 || c.dataGroupsPerNode > replication.MaxDataGroupsPerNode {
			return c, fmt.Errorf("--data-groups-per-node: want 0 to %d, got %d", replication.MaxDataGroupsPerNode, c.dataGroupsPerNode)
		}
		switch c.raftLogStore {
		case "", raftstore.LogStoreBoltDB, raftstore.LogStoreWAL:
		default:
			return c, fmt.Errorf("--raft-log-store: want %s or %s, got %q", raftstore.LogStoreBoltDB, raftstore.LogStoreWAL, c.raftLogStore)
		}
		if c.plaintextWarning, err = c.checkExposure(); err != nil {
			return c, err
		}
		return c, nil
	}
}

func newLogger(c config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	switch c.raftLogLevel {
	case "off", "error", "warn", "info", "debug", "trace":
	default:
		return nil, fmt.Errorf("--raft-log-level: want off, error, warn, info, debug or trace, got %q", c.raftLogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: want text or json, got %q", c.logFormat)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	root := newRootCmd(os.Getenv, os.Stdout, os.Stderr, run)
	root.SetArgs(defaultToRun(root, os.Args[1:]))
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "logd:", err)
		os.Exit(1)
	}
}

// run starts the node and serves until ctx ends, then shuts down cleanly.
func run(ctx context.Context, c config, getenv func(string) string, stderr io.Writer) error {
	logger, err := newLogger(c, stderr)
	if err != nil {
		return err
	}
	logger.Info("logd " + buildinfo.Read().String())
	logger.Info("configuration", c.effective...)
	applyMemoryLimit(c.memoryLimit, getenv, "/", logger)
	if c.plaintextWarning != "" {
		logger.Warn("INSECURE: --insecure-allow-plaintext: anyone who reaches these addresses can read and change every topic, and the Raft port accepts any peer",
			"exposed", c.plaintextWarning)
	}
	// Certificates load before the port binds: a bad file fails the start.
	tlsc, err := loadTLS(c.tls, c.nodeID, logger)
	if err != nil {
		return err
	}
	authOpts, closeAudit, err := c.authn.serverOptions(logger)
	if err != nil {
		return err
	}
	defer closeAudit()
	nofile := openFileLimit()
	conns, err := c.limits.connCaps(nofile, logger)
	if err != nil {
		return err
	}
	// Bind the client port first: a port in use fails before Raft starts.
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.listen, err)
	}
	defer ln.Close()
	if c.advertise == "" {
		c.advertise = ln.Addr().String()
	}
	pln, peerConns, conns, err := c.peer.bind(conns)
	if err != nil {
		return err
	}
	if pln != nil {
		defer pln.Close()
	}
	kln, err := c.kafka.bind(c.advertise)
	if err != nil {
		return err
	}
	if kln != nil {
		defer kln.Close()
	}
	peers := peer.NewResolver(c.peerRoutes)
	// Calls to peers' API ports: https with the peer client configuration
	// under peer TLS, to a server that presents a node certificate.
	peerTLS := tlsc.peer.replication()
	peerHTTP := peer.NewHTTP(peers, peerTLS)
	cfg := replication.Config{
		NodeID:            c.nodeID,
		RaftLogLevel:      c.raftLogLevel,
		DataDir:           c.dataDir,
		RaftBind:          c.raftAddr,
		RaftAdvertise:     c.raftAdvertise,
		Bootstrap:         c.join == "",
		APIAdvertise:      c.advertise,
		PeerAdvertise:     c.peer.advertise,
		KafkaAdvertise:    c.kafka.advertise,
		SegmentSource:     catchup.NewSegmentClient(peerHTTP),
		Register:          joinVia(peerHTTP),
		AskSecret:         secretVia(peerHTTP),
		Peers:             peers,
		PeerTLS:           peerTLS,
		SyncPartitions:    c.fsync == "always",
		RaftLogStore:      c.raftLogStore,
		WALSegmentBytes:   int(c.walSegmentBytes),
		DataGroupsPerNode: c.dataGroupsPerNode,
		// An existing cluster without data groups keeps none unless the
		// operator asks for them.
		DataGroupsPerNodeIsDefault: c.dataGroupsDefault,
		ReplicationFactor:          c.replicationFactor,
		DeadNodeTimeout:            c.deadNodeTimeout,
		MaxMoves:                   c.maxMoves,
		SnapshotThreshold:          c.snapshotEvery,
		TrailingLogs:               c.trailingLogs,
		SnapshotInterval:           c.snapshotPeriod,
		CleanerInterval:            c.cleanerInterval,
		// The flag's 0 (unbounded) is the Config's negative.
		CleanerIOBytesPerSec: cmp.Or(c.cleanerIO, -1),
		MoveBytesPerSecond:   cmp.Or(c.moveRate, -1),
		HeartbeatTimeout:     c.raftHeartbeat,
		ElectionTimeout:      c.raftElection,
		LeaderLeaseTimeout:   c.raftLease,
		Quota:                c.limits.quota(),
		Logger:               logger,
	}
	// Fault builds only (faults_on.go); the default build refuses their
	// environment.
	faultsDone, err := applyFaults(&cfg, getenv, logger)
	if err != nil {
		return err
	}
	defer faultsDone()
	node, err := replication.Open(cfg)
	if err != nil {
		return fmt.Errorf("open node: %w", err)
	}
	if c.join != "" {
		if err := checkJoinState(node.Raft(), c.nodeID, c.join); err != nil {
			node.Close()
			return err
		}
	}
	backend := replication.NewBackend(node)
	reg := newRegistry()
	reg.MustRegister(buildInfoGauge(buildinfo.Read()))
	srv := server.New(server.Options{Backend: backend, Segments: backend.SegmentHandler(), Logger: logger,
		Limits: c.limits.serverLimits(), Conns: conns, Peers: peers, PeerTLS: cfg.PeerTLS, PeerListener: pln != nil, Auth: authOpts, Registry: reg})
	handler := srv.Handler()
	// Reads served to other nodes over the Raft port share the answer
	// budget (replication/remote_answers.go).
	node.SetAnswerBudget(srv.AnswerBudget())
	// The samples the console charts (server/history.go), until shutdown.
	historyCtx, stopHistory := context.WithCancel(ctx)
	historyDone := make(chan struct{})
	go func() { defer close(historyDone); srv.RunHistory(historyCtx) }()
	defer func() { stopHistory(); <-historyDone }()
	if c.pprof {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.Handle("/debug/pprof/", srv.OpsGuard(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/profile", srv.OpsGuard(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/trace", srv.OpsGuard(http.HandlerFunc(pprof.Trace)))
		handler = mux
	}
	httpSrv := newHTTPServer(c.limits, handler, logger)
	// The connection caps count sockets, under TLS: a client that never
	// finishes its handshake holds a slot until ReadHeaderTimeout.
	apiLn := srv.Listener(ln, "api")
	if tlsc.api != nil {
		apiLn = tls.NewListener(apiLn, tlsc.api.ServerConfig(tlsc.apiClientAuth))
	}
	// Certificates reload on SIGHUP and when their files change.
	reloadCtx, stopReload := context.WithCancel(ctx)
	reloadDone := make(chan struct{})
	if tlsc.api != nil || tlsc.peer != nil {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() { defer close(reloadDone); tlsc.serveReloads(reloadCtx, hup, c.tls.reloadInterval, logger) }()
	} else {
		close(reloadDone)
	}
	defer func() { stopReload(); <-reloadDone }()
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(apiLn) }()
	peerSrv, peerErrc := servePeers(pln, srv, c.limits, peerConns, tlsc.peer, logger)
	logger.Info("logd started", "node", c.nodeID, "listen", ln.Addr().String(), "advertise", c.advertise, "peer_advertise", c.peer.advertise,
		"raft", c.raftAddr, "data", c.dataDir, "fsync", c.fsync,
		"open_file_limit", nofile, "max_connections", conns.Max, "max_connections_per_ip", conns.MaxPerAddr,
		"tls", tlsc.api != nil, "client_certificates", clientAuthName(tlsc.apiClientAuth), "peer_tls", tlsc.peer != nil, "auth", c.authn.mode)
	stopKafka := startKafka(c.kafka, kln, backend, srv, reg, c.advertise, c.limits, tlsc, authOpts, cfg.PeerTLS,
		newKafkaForwarder(backend, c.nodeID, peerHTTP), logger)
	joinCtx, stopJoin := context.WithCancel(ctx)
	joinDone := make(chan struct{})
	go func() {
		defer close(joinDone)
		if c.join != "" {
			// It ends when joined or when the node shuts down.
			if _, err := node.JoinCluster(joinCtx, c.join, joinVia(peerHTTP)); err != nil && joinCtx.Err() == nil {
				logger.Error("join", "err", err)
			}
		}
	}()

	var serveErr, peerServeErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case serveErr = <-errc:
	case peerServeErr = <-peerErrc: // nil channel when off: never
		serveErr = fmt.Errorf("peer listener: %w", peerServeErr)
	}
	stopJoin()
	<-joinDone
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(shutCtx); err != nil {
		logger.Warn("http shutdown", "err", err)
	}
	if peerSrv != nil {
		if err := peerSrv.Shutdown(shutCtx); err != nil {
			logger.Warn("peer listener shutdown", "err", err)
		}
		if peerServeErr == nil {
			<-peerErrc
		}
	}
	if serveErr == nil || peerServeErr != nil {
		<-errc
	}
	stopKafka()
	if err := node.Close(); err != nil {
		return fmt.Errorf("close node: %w", err)
	}
	logger.Info("stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}
