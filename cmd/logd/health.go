package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// healthOpts are the flags of logd health.
type healthOpts struct {
	addr, path    string
	timeout       time.Duration
	ca, cert, key string
	tokenFile     string
	stdout        io.Writer
}

// newHealthCmd builds logd health, a probe for container health checks
// and scripts that have no curl: it asks a node's /readyz (or /healthz)
// and exits 0 only on 200.
func newHealthCmd(getenv func(string) string, stdout io.Writer) *cobra.Command {
	o := &healthOpts{stdout: stdout}
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check a node's /readyz (exit 0 when ready), for health checks without curl",
		Long: `Check whether a node is ready: GET /readyz (a leader is known and the node
serves; --path /healthz only asks whether the process answers). Exit 0 when
it answers 200, 1 otherwise, with the reason on stderr.

The address defaults to LOGD_LISTEN's, else 127.0.0.1:7070; a node
listening on every interface (0.0.0.0:7070) is asked on 127.0.0.1. Over TLS
give --tls-ca (and --tls-cert/--tls-key where client certificates are
required); under --auth required give --token-file, or run the node with
--metrics-public.`,
		Example: `  logd health
  logd health --addr 127.0.0.1:7080 --path /healthz
  logd health --tls-ca certs/ca.crt --tls-cert certs/admin.crt --tls-key certs/admin.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	def := getenv("LOGD_LISTEN")
	if def == "" {
		def = "127.0.0.1:7070"
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", def, "node's client API address, host:port or an http(s) URL (default LOGD_LISTEN's)")
	f.StringVar(&o.path, "path", "/readyz", "/readyz or /healthz")
	f.DurationVar(&o.timeout, "timeout", 3*time.Second, "give up after this long")
	f.StringVar(&o.ca, "tls-ca", "", "CA bundle of the node's certificate; switches TLS on")
	f.StringVar(&o.cert, "tls-cert", "", "client certificate, where the node requires one")
	f.StringVar(&o.key, "tls-key", "", "key of --tls-cert")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding a bearer token, under --auth required")
	return cmd
}

// run asks the node once.
func (o *healthOpts) run(ctx context.Context) error {
	switch o.path {
	case "/readyz", "/healthz":
	default:
		return fmt.Errorf("--path: want /readyz or /healthz, got %q", o.path)
	}
	url, err := o.url()
	if err != nil {
		return err
	}
	rt, err := o.transport()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", o.addr, err)
	}
	if o.tokenFile != "" {
		tok, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(o.stdout, "%s: %s\n", url, resp.Status)
	return nil
}

// url is the probe's URL: http unless --tls-ca or an https:// address,
// every-interface hosts asked on loopback.
func (o *healthOpts) url() (string, error) {
	addr := o.addr
	scheme := "http"
	if o.ca != "" || o.cert != "" {
		scheme = "https"
	}
	if s, rest, ok := strings.Cut(addr, "://"); ok {
		scheme, addr = s, rest
	}
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("--addr %q: want host:port or an http(s) URL", o.addr)
	}
	addr = strings.TrimSuffix(addr, "/")
	for _, wild := range []string{"0.0.0.0:", "[::]:", ":"} {
		if strings.HasPrefix(addr, wild) {
			addr = "127.0.0.1:" + strings.TrimPrefix(addr, wild)
			break
		}
	}
	return scheme + "://" + addr + o.path, nil
}

// transport is the probe's HTTP transport, with the TLS files given.
func (o *healthOpts) transport() (http.RoundTripper, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if o.ca == "" && o.cert == "" {
		return t, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.ca != "" {
		pem, err := os.ReadFile(o.ca)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate", o.ca)
		}
	}
	if o.cert != "" || o.key != "" {
		if o.cert == "" || o.key == "" {
			return nil, errors.New("--tls-cert and --tls-key go together")
		}
		kp, err := tls.LoadX509KeyPair(o.cert, o.key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert: %w", err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	t.TLSClientConfig = cfg
	return t, nil
}
