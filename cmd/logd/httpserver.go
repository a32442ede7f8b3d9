package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/server"
	"github.com/spf13/pflag"
)

// limitConfig is what a node lets clients cost it: HTTP timeouts and
// header size, request bodies and the memory they hold, connections, and
// the cluster's topic quota. Every bound is on by default; 0 switches one
// off.
type limitConfig struct {
	maxRequestBytes int64
	inflightBytes   int64
	// inflightResponseBytes is the answer budget; maxStreams the HTTP/2
	// streams one connection may have open.
	inflightResponseBytes int64
	maxStreams            int64
	readHeaderTimeout     time.Duration
	bodyTimeout           time.Duration
	bodyMinRate           int64
	writeTimeout          time.Duration
	idleTimeout           time.Duration
	maxHeaderBytes        int64
	// maxConns and fdReserve are -1 for "auto" (connCaps).
	maxConns      int64
	maxConnsPerIP int64
	fdReserve     int64
	maxTopics     int64
	maxPartitions int64
	// maxTopicsPerPrincipal and maxPartitionsPerPrincipal bound what one
	// principal creates (0: unbounded, the default).
	maxTopicsPerPrincipal     int64
	maxPartitionsPerPrincipal int64
}

// Defaults of the limit flags that are not the server package's.
const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultIdleTimeout       = 2 * time.Minute
	defaultMaxHeaderBytes    = 64 << 10
	defaultMaxConnsPerIP     = 1024
	// defaultMaxStreams is the HTTP/2 streams one connection may have
	// open (Go's default is 250): enough for a client's calls in flight;
	// the answer budget, not this cap, bounds what they cost.
	defaultMaxStreams    = 100
	defaultMaxTopics     = 10_000
	defaultMaxPartitions = 100_000
	// minConns is the fewest connections the automatic cap allows, however
	// low the open-file limit.
	minConns = 64
)

// addLimitFlags registers the limit flags on fs and returns the function
// that reads them once fs is parsed.
func addLimitFlags(fs *pflag.FlagSet) func() (limitConfig, error) {
	type intFlag struct {
		name, envName, help string
		dst                 *int64
		auto                bool    // accepts "auto", stored as -1
		raw                 *string // an auto flag's text
		zero                string  // what 0 means, if not "unbounded"
	}
	type durFlag struct {
		name, envName, help string
		dst                 *time.Duration
	}
	var c limitConfig
	ints := []*intFlag{
		{name: "max-request-bytes", envName: "LOGD_MAX_REQUEST_BYTES", dst: &c.maxRequestBytes,
			help: "largest request body, as sent and once inflated; larger ones are refused unread (RECORD_TOO_LARGE)"},
		{name: "max-inflight-request-bytes", envName: "LOGD_MAX_INFLIGHT_REQUEST_BYTES", dst: &c.inflightBytes,
			help: "memory budget of request bodies being read or served at once; a request past it is refused with OVERLOADED and retry-after, unread"},
		{name: "max-inflight-response-bytes", envName: "LOGD_MAX_INFLIGHT_RESPONSE_BYTES", dst: &c.inflightResponseBytes,
			help: "memory budget of answers being built or sent at once (API and Kafka fetches), one client at most half of it; an answer past it waits briefly, then is refused with OVERLOADED and retry-after (Kafka: answered empty and throttled)"},
		{name: "max-concurrent-streams", envName: "LOGD_MAX_CONCURRENT_STREAMS", dst: &c.maxStreams,
			help: "HTTP/2 streams (calls) one client connection may have open at once; more wait for one to end", zero: "net/http's default, 250"},
		{name: "http-body-min-rate", envName: "LOGD_HTTP_BODY_MIN_RATE", dst: &c.bodyMinRate,
			help: "bytes/s a request body must keep up after --http-body-timeout; each byte received extends the body's deadline"},
		{name: "max-header-bytes", envName: "LOGD_MAX_HEADER_BYTES", dst: &c.maxHeaderBytes,
			help: "largest request header", zero: "net/http's default, 1 MiB"},
		{name: "max-connections", envName: "LOGD_MAX_CONNECTIONS", dst: &c.maxConns, auto: true,
			help: "client connections open at once, the API's and the Kafka listener's together; auto: the open-file limit less --fd-reserve; at the cap new connections wait in the accept queue; never above the open-file limit less the reserve"},
		{name: "max-connections-per-ip", envName: "LOGD_MAX_CONNECTIONS_PER_IP", dst: &c.maxConnsPerIP,
			help: "client connections from one remote IP address (API and Kafka together); more are closed at once"},
		{name: "fd-reserve", envName: "LOGD_FD_RESERVE", dst: &c.fdReserve, auto: true,
			help: "file descriptors kept from client connections for segment files, Raft and its store; auto: half the open-file limit", zero: "no reserve"},
		{name: "max-topics", envName: "LOGD_MAX_TOPICS", dst: &c.maxTopics,
			help: "topics in the cluster; set the same on every node (the leader's applies)"},
		{name: "max-partitions", envName: "LOGD_MAX_PARTITIONS", dst: &c.maxPartitions,
			help: "partitions of all topics in the cluster; set the same on every node (the leader's applies)"},
		{name: "max-topics-per-principal", envName: "LOGD_MAX_TOPICS_PER_PRINCIPAL", dst: &c.maxTopicsPerPrincipal,
			help: "topics one principal may have created; set the same on every node (the leader's applies)"},
		{name: "max-partitions-per-principal", envName: "LOGD_MAX_PARTITIONS_PER_PRINCIPAL", dst: &c.maxPartitionsPerPrincipal,
			help: "partitions of the topics one principal may have created; set the same on every node (the leader's applies)"},
	}
	defs := map[string]int64{
		"max-request-bytes": server.MaxRequestBytes, "max-inflight-request-bytes": server.DefaultInflightBytes,
		"max-inflight-response-bytes": server.DefaultInflightResponseBytes, "max-concurrent-streams": defaultMaxStreams,
		"http-body-min-rate": server.DefaultBodyMinRate, "max-header-bytes": defaultMaxHeaderBytes,
		"max-connections-per-ip": defaultMaxConnsPerIP, "max-topics": defaultMaxTopics, "max-partitions": defaultMaxPartitions,
	}
	for _, f := range ints {
		zero := f.zero
		if zero == "" {
			zero = "unbounded"
		}
		help := fmt.Sprintf("%s; 0: %s (%s)", f.help, zero, f.envName)
		if f.auto {
			f.raw = new(string)
			fs.StringVar(f.raw, f.name, "auto", help)
			continue
		}
		fs.Int64Var(f.dst, f.name, defs[f.name], help)
	}
	durs := []*durFlag{
		{name: "http-read-header-timeout", envName: "LOGD_HTTP_READ_HEADER_TIMEOUT", dst: &c.readHeaderTimeout,
			help: "time to send a request's header"},
		{name: "http-body-timeout", envName: "LOGD_HTTP_BODY_TIMEOUT", dst: &c.bodyTimeout,
			help: "time to send a request body, plus what --http-body-min-rate adds; long polls wait on after their body is in"},
		{name: "http-write-timeout", envName: "LOGD_HTTP_WRITE_TIMEOUT", dst: &c.writeTimeout,
			help: "time from a request's start to the end of its answer; above the longest long poll (60s)"},
		{name: "http-idle-timeout", envName: "LOGD_HTTP_IDLE_TIMEOUT", dst: &c.idleTimeout,
			help: "how long an idle keep-alive connection stays open"},
	}
	durDefs := map[string]time.Duration{
		"http-read-header-timeout": defaultReadHeaderTimeout, "http-body-timeout": server.DefaultBodyTimeout,
		"http-write-timeout": server.DefaultWriteTimeout, "http-idle-timeout": defaultIdleTimeout,
	}
	for _, f := range durs {
		fs.DurationVar(f.dst, f.name, durDefs[f.name], fmt.Sprintf("%s; 0: none (%s)", f.help, f.envName))
	}
	return func() (limitConfig, error) {
		for _, f := range ints {
			if !f.auto {
				if *f.dst < 0 {
					return c, fmt.Errorf("--%s: want an integer >= 0, got %d", f.name, *f.dst)
				}
				continue
			}
			if *f.raw == "auto" {
				*f.dst = -1
				continue
			}
			v, err := strconv.ParseInt(*f.raw, 10, 64)
			if err != nil || v < 0 {
				return c, fmt.Errorf("--%s: want an integer >= 0 or auto, got %q", f.name, *f.raw)
			}
			*f.dst = v
		}
		for _, f := range durs {
			if *f.dst < 0 {
				return c, fmt.Errorf("--%s: want a duration >= 0, got %s", f.name, *f.dst)
			}
		}
		if c.maxHeaderBytes > 1<<30 {
			return c, fmt.Errorf("--max-header-bytes: at most 1 GiB, got %d", c.maxHeaderBytes)
		}
		if err := c.serverLimits().Validate(); err != nil {
			return c, fmt.Errorf("request limits (--max-request-bytes, --max-inflight-request-bytes, --max-inflight-response-bytes, --http-write-timeout): %w", err)
		}
		return c, nil
	}
}

// off maps a flag's 0 (off) to the server options' negative.
func off[T int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// serverLimits are the request limits for server.Options.
func (c limitConfig) serverLimits() server.Limits {
	return server.Limits{
		MaxRequestBytes:       off(c.maxRequestBytes),
		InflightBytes:         off(c.inflightBytes),
		InflightResponseBytes: off(c.inflightResponseBytes),
		BodyTimeout:           off(c.bodyTimeout),
		BodyMinRate:           off(c.bodyMinRate),
		WriteTimeout:          off(c.writeTimeout),
	}
}

// quota is the cluster's topic quota for replication.Config.
func (c limitConfig) quota() backend.TopicQuota {
	return backend.TopicQuota{MaxTopics: c.maxTopics, MaxPartitions: c.maxPartitions,
		MaxTopicsPerPrincipal: c.maxTopicsPerPrincipal, MaxPartitionsPerPrincipal: c.maxPartitionsPerPrincipal}
}

// connCaps returns the connection limits for a process whose open-file
// limit is nofile (0: unknown). The cap leaves the reserve to the files a
// node opens itself (segments, Raft's store and snapshots, its
// connections to peers), so client sockets alone can never make a
// segment roll fail with EMFILE; a larger --max-connections is lowered to
// it. The automatic reserve is half the limit.
func (c limitConfig) connCaps(nofile uint64, logger *slog.Logger) (server.ConnLimits, error) {
	out := server.ConnLimits{MaxPerAddr: int(c.maxConnsPerIP)}
	if c.maxConns == 0 {
		logger.Warn("client connections unbounded (--max-connections 0): a flood of sockets can exhaust the open-file limit and stop the node", "open_file_limit", nofile)
		return out, nil
	}
	if nofile == 0 || nofile > 1<<40 {
		// No limit to stay under: the explicit cap, or none.
		out.Max = int(max(c.maxConns, 0))
		return out, nil
	}
	reserve := c.fdReserve
	if reserve < 0 {
		reserve = int64(nofile / 2)
	}
	room := int64(nofile) - reserve
	if room < minConns {
		return out, fmt.Errorf("open-file limit %d less --fd-reserve %d leaves %d connections, fewer than %d: raise the limit (ulimit -n) or lower the reserve", nofile, reserve, room, minConns)
	}
	out.Max = int(room)
	if c.maxConns > 0 && c.maxConns < room {
		out.Max = int(c.maxConns)
	} else if c.maxConns > room {
		logger.Warn("--max-connections lowered to the open-file limit less the reserve", "asked", c.maxConns, "cap", room, "open_file_limit", nofile, "fd_reserve", reserve)
	}
	if out.MaxPerAddr > out.Max {
		out.MaxPerAddr = 0 // the listener's cap bounds it already
	}
	return out, nil
}

// newHTTPServer is the client API's HTTP server: HTTP/1.1 for Connect and
// JSON clients, HTTP/2 for gRPC (cleartext, or by ALPN over TLS), with
// the header, idle and header-size bounds of c and its cap of HTTP/2
// streams per connection. A request's body and
// answer are timed by the server package's limits (server.Limits), per
// request, so that a long poll is not cut by a whole-request read
// timeout; ReadTimeout and WriteTimeout stay unset for that reason.
func newHTTPServer(c limitConfig, handler http.Handler, logger *slog.Logger) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           handler,
		Protocols:         &protocols,
		ReadHeaderTimeout: c.readHeaderTimeout,
		IdleTimeout:       c.idleTimeout,
		MaxHeaderBytes:    int(c.maxHeaderBytes),
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: int(c.maxStreams)},
		// Accept errors (EMFILE) and bad requests, in the node's log.
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
