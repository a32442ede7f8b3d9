package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/logd-dev/logd/internal/tlsconf"
)

// Defaults of logd cert.
const (
	defaultCertDir      = "./certs"
	defaultCAValidFor   = 10 * 365 * 24 * time.Hour
	defaultLeafValidFor = 365 * 24 * time.Hour
	// certBackdate starts a certificate's validity a little before it is
	// issued, so that a node whose clock runs behind accepts it at once.
	certBackdate = 5 * time.Minute
	caFileBase   = "ca"
)

const certUsage = `usage: logd cert ca|node|client [flags]

  logd cert ca     --dir DIR                          a development CA: DIR/ca.crt, DIR/ca.key
  logd cert node   --dir DIR --id ID --hosts H1,H2    a node certificate signed by DIR/ca.*: DIR/ID.crt, DIR/ID.key
  logd cert client --dir DIR --name NAME              a client certificate signed by DIR/ca.*: DIR/NAME.crt, DIR/NAME.key

Certificate identities are in docs/security.md. Run logd cert SUBCOMMAND -h for its flags.
`

// certOutput is what logd cert wrote, for --output json.
type certOutput struct {
	Certificate string    `json:"certificate"`
	Key         string    `json:"key"`
	Subject     string    `json:"subject"`
	Identity    string    `json:"identity,omitempty"`
	DNSNames    []string  `json:"dns_names,omitempty"`
	IPAddresses []string  `json:"ip_addresses,omitempty"`
	NotBefore   time.Time `json:"not_before"`
	NotAfter    time.Time `json:"not_after"`
	CA          bool      `json:"ca"`
}

// runCert runs logd cert: args are those after "cert"; the issued
// certificates start their validity at now less certBackdate.
func runCert(args []string, stdout, stderr io.Writer, now time.Time) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, certUsage)
		return errors.New("cert: want a subcommand: ca, node or client")
	}
	sub := args[0]
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stderr, certUsage)
		return flag.ErrHelp
	case "ca", "node", "client":
	default:
		fmt.Fprint(stderr, certUsage)
		return fmt.Errorf("cert: unknown subcommand %q: want ca, node or client", sub)
	}
	fs := flag.NewFlagSet("logd cert "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", defaultCertDir, "directory of the CA and of the files written")
	def := defaultLeafValidFor
	if sub == "ca" {
		def = defaultCAValidFor
	}
	validFor := fs.String("valid-for", formatDays(def), "validity: a duration (8760h) or days (365d)")
	force := fs.Bool("force", false, "overwrite existing files")
	output := fs.String("output", "text", "text or json")
	var id, hosts, name string
	switch sub {
	case "ca":
		fs.StringVar(&name, "name", "logd development CA", "the CA's common name")
	case "node":
		fs.StringVar(&id, "id", "", "node id (its --node-id); names the files, and the URI SAN logd://node/ID")
		fs.StringVar(&hosts, "hosts", "127.0.0.1,localhost", "comma-separated DNS names and IP addresses the node is reached at (API and Raft)")
	case "client":
		fs.StringVar(&name, "name", "", "user name: common name and URI SAN logd://user/NAME; names the files")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("cert %s: unexpected arguments: %s", sub, strings.Join(fs.Args(), " "))
	}
	if *output != "text" && *output != "json" {
		return fmt.Errorf("cert %s: --output: want text or json, got %q", sub, *output)
	}
	d, err := parseValidity(*validFor)
	if err != nil {
		return fmt.Errorf("cert %s: --valid-for: %w", sub, err)
	}
	notBefore := now.Add(-certBackdate)

	var kp *tlsconf.KeyPair
	base := caFileBase
	switch sub {
	case "ca":
		if name == "" {
			return errors.New("cert ca: --name: want a common name")
		}
		if err := checkNotExist(*dir, base, *force); err != nil {
			return err
		}
		if kp, err = tlsconf.NewCA(name, notBefore, d); err != nil {
			return err
		}
	case "node", "client":
		base = id
		flagName := "--id"
		if sub == "client" {
			base, flagName = name, "--name"
		}
		if err := tlsconf.ValidName(base); err != nil {
			return fmt.Errorf("cert %s: %s: %w", sub, flagName, err)
		}
		if base == caFileBase {
			return fmt.Errorf("cert %s: %s: %q would overwrite the CA's files", sub, flagName, base)
		}
		if err := checkNotExist(*dir, base, *force); err != nil {
			return err
		}
		ca, err := loadCA(*dir)
		if err != nil {
			return fmt.Errorf("cert %s: %w (create one with: logd cert ca --dir %s)", sub, err, *dir)
		}
		if sub == "node" {
			kp, err = ca.IssueNode(id, strings.Split(hosts, ","), notBefore, d)
		} else {
			kp, err = ca.IssueClient(name, notBefore, d)
		}
		if err != nil {
			return fmt.Errorf("cert %s: %w", sub, err)
		}
	}
	certPath, keyPath := certPaths(*dir, base)
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("cert %s: %w", sub, err)
	}
	// The key first: a node watching the pair sees at worst a new key
	// with the old certificate, which it refuses once and keeps the old
	// pair until the certificate follows.
	if err := writeFileAtomic(keyPath, kp.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("cert %s: %w", sub, err)
	}
	if err := writeFileAtomic(certPath, kp.CertPEM, 0o644); err != nil {
		return fmt.Errorf("cert %s: %w", sub, err)
	}
	return printCert(stdout, *output, certPath, keyPath, kp)
}

func certPaths(dir, base string) (certPath, keyPath string) {
	return filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
}

// checkNotExist refuses to replace either file of base unless force.
func checkNotExist(dir, base string, force bool) error {
	if force {
		return nil
	}
	c, k := certPaths(dir, base)
	for _, p := range []string{c, k} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("cert: %s exists; --force replaces it", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cert: %w", err)
		}
	}
	return nil
}

func loadCA(dir string) (*tlsconf.KeyPair, error) {
	certPath, keyPath := certPaths(dir, caFileBase)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	ca, err := tlsconf.ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", certPath, keyPath, err)
	}
	if !ca.Cert.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate", certPath)
	}
	return ca, nil
}

// writeFileAtomic replaces name by a rename, so that a reader (a node
// watching its files) sees the old content or the new, never a part.
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename, a no-op
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}

// parseValidity reads a duration, or a whole number of days ("365d").
func parseValidity(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 100*365 {
			return 0, fmt.Errorf("want 1d to 36500d, got %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive duration or a number of days, got %q", s)
	}
	return d, nil
}

// formatDays writes a whole number of days as parseValidity reads it.
func formatDays(d time.Duration) string { return fmt.Sprintf("%dd", d/(24*time.Hour)) }

func printCert(w io.Writer, output, certPath, keyPath string, kp *tlsconf.KeyPair) error {
	c := kp.Cert
	out := certOutput{
		Certificate: certPath, Key: keyPath, Subject: c.Subject.String(),
		DNSNames: c.DNSNames, NotBefore: c.NotBefore.UTC(), NotAfter: c.NotAfter.UTC(), CA: c.IsCA,
	}
	if len(c.URIs) > 0 {
		out.Identity = c.URIs[0].String()
	}
	for _, ip := range c.IPAddresses {
		out.IPAddresses = append(out.IPAddresses, ip.String())
	}
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "certificate\t%s\n", out.Certificate)
	fmt.Fprintf(tw, "key\t%s\t(mode 0600)\n", out.Key)
	fmt.Fprintf(tw, "subject\t%s\n", out.Subject)
	if out.Identity != "" {
		fmt.Fprintf(tw, "identity\t%s\n", out.Identity)
	}
	if hosts := append(append([]string(nil), out.DNSNames...), out.IPAddresses...); len(hosts) > 0 {
		fmt.Fprintf(tw, "hosts\t%s\n", strings.Join(hosts, ", "))
	}
	fmt.Fprintf(tw, "valid\t%s to %s\n", out.NotBefore.Format(time.RFC3339), out.NotAfter.Format(time.RFC3339))
	return tw.Flush()
}
