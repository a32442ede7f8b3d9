package logdtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/replicationtest"
	"github.com/logd-dev/logd/server"
)

// Options configures a Server. The zero value is a node on the wall clock
// in a temporary directory.
type Options struct {
	// Now is the node's clock: it stamps every command, so leases,
	// backoff, session expiry and retention follow it. Default time.Now.
	// A clock that only moves when the test says keeps time-dependent
	// tests deterministic; start it near the wall clock where the server
	// also reads the wall clock (group lag).
	Now func() time.Time
	// NodeID is the node's Raft server id; default "node-1".
	NodeID string
	// Dir holds the partition logs; default a new temporary directory that
	// Close removes.
	Dir string
	// FS is the partition logs' file system; default the operating
	// system's. A log/logtest.FaultFS over log.OSFS fails or slows the
	// node's writes and syncs on demand: the node then stops, as a
	// production node stops on an I/O error in its state machine, and
	// Close reports the failure.
	FS log.FS
	// Auth is the node's authentication and authorization, as cmd/logd's
	// --auth, --superuser and --bootstrap-token-file set them; its clock
	// defaults to Now. The zero value checks nothing (--auth none).
	Auth server.AuthOptions
	// FeatureLevel is the feature level the node runs at; zero is its
	// build's. A lower one plays an older build in a rolling upgrade: the
	// node proposes nothing the level does not cover, so a test can see a
	// newer feature refused (backend.FeatureLevelError).
	FeatureLevel backend.FeatureLevel
	// TLS, if set, serves the API over TLS with this configuration
	// (HTTP/2 and HTTP/1.1): URL is https, and a client certificate it
	// verifies gives the caller's principal (docs/security.md). Default:
	// plain HTTP.
	TLS *tls.Config
	// HistoryInterval is how often the node samples what the console
	// charts (server.Options.HistoryInterval); default 10 s, shorter for a
	// test that reads the charts.
	HistoryInterval time.Duration
	// DataGroupsPerNode runs that many data groups beside the meta group
	// (logd's --data-groups-per-node), over which the node's topics are
	// placed; 0 (the default) runs none.
	DataGroupsPerNode int
}

// Server is a real logd node served over HTTP on 127.0.0.1. Its methods
// are safe for concurrent use.
type Server struct {
	node  *replicationtest.Node
	http  *httptest.Server
	reg   *prometheus.Registry
	hooks *hooks
	// removeDir is the temporary directory Close removes, if New made it.
	removeDir string

	fatalMu sync.Mutex
	fatal   []error // guarded by fatalMu: state machine failures

	// stopHistory ends the server's history sampling; historyDone is
	// closed once it returned.
	stopHistory context.CancelFunc
	historyDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Start runs a new Server for the test and closes it when the test ends;
// it fails the test if the node cannot start, or if it stopped on a state
// machine failure.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("logdtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("logdtest: %v", err)
		}
	})
	return s
}

// New runs a new Server and returns once its node leads and serves. The
// caller must Close it; tests use Start instead.
func New(opts Options) (*Server, error) {
	if opts.NodeID == "" {
		opts.NodeID = "node-1"
	}
	s := &Server{reg: prometheus.NewRegistry(), hooks: newHooks()}
	if opts.Dir == "" {
		dir, err := os.MkdirTemp("", "logdtest-")
		if err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		opts.Dir, s.removeDir = dir, dir
	}
	if err := s.start(opts); err != nil {
		s.http.Close()
		if s.removeDir != "" {
			os.RemoveAll(s.removeDir)
		}
		return nil, err
	}
	return s, nil
}

// start opens the node, waits for it to serve, and starts the HTTP server.
func (s *Server) start(opts Options) error {
	// The listener comes first: the node registers its address as the
	// client API address, which Status reports.
	s.http = httptest.NewUnstartedServer(nil)
	logger := slog.New(slog.DiscardHandler)
	node, err := replicationtest.Open(replicationtest.Options{
		NodeID:            opts.NodeID,
		Dir:               opts.Dir,
		Now:               opts.Now,
		FS:                opts.FS,
		FeatureLevel:      opts.FeatureLevel,
		DataGroupsPerNode: opts.DataGroupsPerNode,
		APIAdvertise:      s.http.Listener.Addr().String(),
		Fatal:             s.stopped,
	})
	if err != nil {
		return err
	}
	s.node = node
	// As cmd/logd builds it: the handlers over the node's backend, with
	// the segment endpoint a peer would catch up from.
	backend := node.Backend
	if opts.Auth.Now == nil {
		opts.Auth.Now = opts.Now
	}
	srv := server.New(server.Options{Backend: backend, Segments: backend.SegmentHandler(), Logger: logger, Registry: s.reg, Auth: opts.Auth,
		HistoryInterval: opts.HistoryInterval})
	var historyCtx context.Context
	historyCtx, s.stopHistory = context.WithCancel(context.Background())
	s.historyDone = make(chan struct{})
	go func() { defer close(s.historyDone); srv.RunHistory(historyCtx) }()
	s.http.Config.Handler = s.hooks.wrap(srv.Handler())
	if opts.TLS != nil {
		// Handshakes a test refuses are not news.
		s.http.Config.ErrorLog = stdlog.New(io.Discard, "", 0)
		s.http.EnableHTTP2 = true
		s.http.TLS = opts.TLS.Clone()
		s.http.StartTLS()
		return nil
	}
	s.http.Start()
	return nil
}

// stopped records a state machine failure: the node stops there, as a
// production node would (where it exits), and Close reports it.
func (s *Server) stopped(err error) {
	s.fatalMu.Lock()
	defer s.fatalMu.Unlock()
	s.fatal = append(s.fatal, err)
}

// URL returns the server's base URL, "http://127.0.0.1:port" (https with
// Options.TLS).
func (s *Server) URL() string { return s.http.URL }

// Addr returns the server's "127.0.0.1:port".
func (s *Server) Addr() string { return s.http.Listener.Addr().String() }

// Clean runs one pass of the leader's cleaner now: partitions whose
// closed segments are past the topic's retention.ms (by Options.Now) or
// retention.bytes are trimmed, and compaction runs where it is due. To
// trim at a chosen offset, give the topic a small segment.bytes so each
// produce call writes its own segment.
func (s *Server) Clean(ctx context.Context) error {
	if err := s.node.Clean(ctx); err != nil {
		return fmt.Errorf("clean: %w", err)
	}
	return nil
}

// Close ends every call in flight, stops the HTTP server and the node,
// and removes the directory New made. It returns the node's state machine
// failures, if any. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		// Long polls end when their connection does; Close alone would
		// wait for them.
		s.http.CloseClientConnections()
		s.http.Close()
		if s.stopHistory != nil {
			s.stopHistory()
			<-s.historyDone
		}
		errs := []error{s.node.Close()}
		s.fatalMu.Lock()
		for _, err := range s.fatal {
			errs = append(errs, fmt.Errorf("node stopped: %w", err))
		}
		s.fatalMu.Unlock()
		if s.removeDir != "" {
			errs = append(errs, os.RemoveAll(s.removeDir))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
