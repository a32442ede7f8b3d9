package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/internal/quota"
	"github.com/logd-dev/logd/server"
)

// authConfig is who may call the node and what a principal may cost it
// (docs/security.md): superusers, the bootstrap token, the audit log,
// whether /metrics and the health checks are public, and per-principal
// byte-rate quotas.
type authConfig struct {
	// mode is "none" or "required" (--auth).
	mode          string
	superusers    []string
	bootstrapFile string
	metricsPublic bool
	auditLog      string
	// quotaProduce and quotaFetch are bytes/s per principal; 0 unbounded.
	quotaProduce, quotaFetch int64
}

// The values of --auth.
const (
	authNone     = "none"
	authRequired = "required"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// Type names the flag's kind in help; config.go splits a listType value
// from the environment at commas.
func (l *listFlag) Type() string { return listType }

// listType is the pflag type name of listFlag.
const listType = "list"

// addAuthFlags registers the authentication flags on fs and returns the
// function that reads them once fs is parsed.
func addAuthFlags(fs *pflag.FlagSet) func() (authConfig, error) {
	var c authConfig
	fs.StringVar(&c.mode, "auth", authNone, "none or required: whether every call needs a principal (client certificate or bearer token) and is checked against the ACLs (LOGD_AUTH)")
	var supers listFlag
	fs.Var(&supers, "superuser", "a principal (User:NAME, NAME or Node:ID) that bypasses ACLs; repeatable (LOGD_SUPERUSERS, comma-separated)")
	fs.StringVar(&c.bootstrapFile, "bootstrap-token-file", "",
		"file holding a token that authenticates as User:admin, a superuser on this node; a missing file gets a new token, written with mode 0600 (LOGD_BOOTSTRAP_TOKEN_FILE)")
	fs.BoolVar(&c.metricsPublic, "metrics-public", false,
		"serve /metrics, /healthz and /readyz without credentials under --auth required (LOGD_METRICS_PUBLIC=true)")
	fs.StringVar(&c.auditLog, "audit-log", "", "append the audit log (one JSON line per admin action) to this file; default the main log, message \"audit\" (LOGD_AUDIT_LOG)")
	quotas := []struct {
		name, envName string
		dst           *int64
	}{
		{"quota-produce-bytes-per-second", "LOGD_QUOTA_PRODUCE_BYTES_PER_SECOND", &c.quotaProduce},
		{"quota-fetch-bytes-per-second", "LOGD_QUOTA_FETCH_BYTES_PER_SECOND", &c.quotaFetch},
	}
	for _, q := range quotas {
		dir, _, _ := strings.Cut(strings.TrimPrefix(q.name, "quota-"), "-")
		fs.Int64Var(q.dst, q.name, 0,
			fmt.Sprintf("record bytes each principal may %s per second on this node; past it calls are refused with OVERLOADED and a retry-after; 0: unbounded (%s)", dir, q.envName))
	}
	return func() (authConfig, error) {
		switch c.mode {
		case authNone, authRequired:
		default:
			return c, fmt.Errorf("--auth: want none or required, got %q", c.mode)
		}
		for _, q := range quotas {
			if *q.dst < 0 {
				return c, fmt.Errorf("--%s: want a byte rate >= 0, got %d", q.name, *q.dst)
			}
		}
		for _, s := range supers {
			if s = strings.TrimSpace(s); s != "" {
				c.superusers = append(c.superusers, s)
			}
		}
		return c, nil
	}
}

// serverOptions builds the server's AuthOptions: it parses the
// superusers, reads (or creates) the bootstrap token and opens the audit
// log. The returned function closes the audit log.
func (c authConfig) serverOptions(logger *slog.Logger) (server.AuthOptions, func() error, error) {
	opts := server.AuthOptions{
		Required:      c.mode == authRequired,
		MetricsPublic: c.metricsPublic,
		Quotas:        quota.Rates{ProduceBytesPerSec: c.quotaProduce, FetchBytesPerSec: c.quotaFetch},
	}
	closeAudit := func() error { return nil }
	for _, s := range c.superusers {
		p, err := auth.ParsePrincipal(s)
		if err != nil {
			return opts, closeAudit, fmt.Errorf("--superuser: %w", err)
		}
		opts.Superusers = append(opts.Superusers, p)
	}
	if c.bootstrapFile != "" {
		tok, err := bootstrapToken(c.bootstrapFile, logger)
		if err != nil {
			return opts, closeAudit, fmt.Errorf("--bootstrap-token-file: %w", err)
		}
		opts.BootstrapToken = &tok
	}
	if c.auditLog != "" {
		f, err := os.OpenFile(c.auditLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return opts, closeAudit, fmt.Errorf("--audit-log: %w", err)
		}
		opts.Audit = slog.New(slog.NewJSONHandler(f, nil))
		closeAudit = f.Close
	}
	return opts, closeAudit, nil
}

// bootstrapToken reads the token in path, or, when there is no file,
// draws one and writes it there (mode 0600, never over an existing file),
// logging the path, never the token.
func bootstrapToken(path string, logger *slog.Logger) (auth.Token, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		tok, err := auth.ParseToken(strings.TrimSpace(string(b)))
		if err != nil {
			return auth.Token{}, fmt.Errorf("%s: %w", path, err)
		}
		if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
			logger.Warn("the bootstrap token file is readable by others than its owner", "path", path, "mode", st.Mode().Perm().String())
		}
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return auth.Token{}, err
	}
	tok, err := auth.NewToken(rand.Reader)
	if err != nil {
		return auth.Token{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return auth.Token{}, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return auth.Token{}, err
	}
	if _, err := f.WriteString(tok.String() + "\n"); err != nil {
		f.Close()
		return auth.Token{}, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return auth.Token{}, fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return auth.Token{}, fmt.Errorf("close %s: %w", path, err)
	}
	logger.Warn("generated a bootstrap token: it authenticates as User:admin, a superuser on this node; keep the file secret", "path", path)
	return tok, nil
}
