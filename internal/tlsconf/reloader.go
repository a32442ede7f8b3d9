package tlsconf

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Config names a Reloader's files.
type Config struct {
	// CertFile holds the certificate (PEM; a chain, leaf first) and
	// KeyFile its private key (PEM). Both are required.
	CertFile, KeyFile string
	// CAFiles are PEM bundles whose certificates together make the pool
	// that verifies peers. Empty names are skipped; with none, the
	// Reloader has no pool (ServerConfig then verifies no client
	// certificate, ClientConfig verifies servers against the system
	// roots).
	CAFiles []string
	// CertFromCA refuses a certificate that does not chain to the pool:
	// material a node presents to peers that verify it with the same
	// bundle, so a rotation caught half done (new CA, old certificate)
	// keeps the last consistent material.
	CertFromCA bool
	// Check, when set, refuses a certificate it returns an error for,
	// as a load failure: a reload keeps the last good material. A node
	// whose API port peers call checks there that it is a node
	// certificate (cmd/logd).
	Check func(leaf *x509.Certificate) error
	// Now is the clock that judges validity; nil is time.Now.
	Now func() time.Time
	// Logger receives Watch's reloads and failures; nil discards them.
	Logger *slog.Logger
}

// Validate checks that the required files are named.
func (c Config) Validate() error {
	if c.CertFile == "" || c.KeyFile == "" {
		return errors.New("tlsconf: a certificate file and a key file are required")
	}
	if c.CertFromCA && !c.hasCA() {
		return errors.New("tlsconf: CertFromCA without a CA file")
	}
	return nil
}

func (c Config) hasCA() bool {
	for _, f := range c.CAFiles {
		if f != "" {
			return true
		}
	}
	return false
}

// Reloader holds TLS material loaded from files and replaces it on
// Reload. Its methods are safe for concurrent use; handshakes read the
// current material without locking.
type Reloader struct {
	cfg Config
	now func() time.Time
	log *slog.Logger

	cur atomic.Pointer[material]

	mu sync.Mutex // serializes loads
	// stamp identifies the files' state last loaded or tried (guarded
	// by mu); Watch reloads when it changes.
	stamp [sha256.Size]byte
}

// material is one generation of loaded files, immutable once stored.
type material struct {
	cert tls.Certificate // Leaf set
	pool *x509.CertPool  // nil without CA files
	// ticketKey encrypts this generation's TLS session tickets, so a
	// session is never resumed across a reload (docs/security.md).
	ticketKey [32]byte
}

// New loads the files of cfg. A Reloader is never without material:
// files that do not load are an error here.
func New(cfg Config) (*Reloader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Reloader{cfg: cfg, now: cfg.Now, log: cfg.Logger}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again and makes them current for the next
// handshake. When they do not load, the current material stays and the
// error says why.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	files, stamp, err := r.read()
	if err != nil {
		return err
	}
	return r.install(files, stamp)
}

// Watch polls the files every interval and reloads them when their size,
// modification time or content changes, logging the outcome; a change
// that fails to load is logged once, not at every poll. It returns when
// ctx ends; interval <= 0 returns at once.
func (r *Reloader) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := r.reloadIfChanged()
		switch {
		case err != nil:
			r.log.Error("tls: changed files do not load; keeping the current certificate", "cert", r.cfg.CertFile, "err", err)
		case changed:
			leaf := r.Leaf()
			r.log.Info("tls: reloaded changed files", "cert", r.cfg.CertFile, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
		}
	}
}

// Leaf is the current certificate.
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().cert.Leaf }

// reloadIfChanged loads the files if their stamp differs from the last
// one loaded or tried.
func (r *Reloader) reloadIfChanged() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	files, stamp, err := r.read()
	if err != nil {
		// Unreadable (a file replaced by rename, caught in between):
		// report it once per distinct error text.
		s := sha256.Sum256([]byte(err.Error()))
		if s == r.stamp {
			return false, nil
		}
		r.stamp = s
		return false, err
	}
	if stamp == r.stamp {
		return false, nil
	}
	if err := r.install(files, stamp); err != nil {
		return false, err
	}
	return true, nil
}

// fileSet is the content of a Reloader's files.
type fileSet struct {
	cert, key []byte
	cas       [][]byte
}

// read reads every file and returns them with their stamp: a hash of
// each file's name, size, modification time and content.
func (r *Reloader) read() (fileSet, [sha256.Size]byte, error) {
	var fs fileSet
	h := sha256.New()
	readOne := func(name string) ([]byte, error) {
		st, err := os.Stat(name)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: %w", err)
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: %w", err)
		}
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], uint64(st.Size()))
		binary.BigEndian.PutUint64(b[8:], uint64(st.ModTime().UnixNano()))
		h.Write([]byte(name))
		h.Write(b[:])
		sum := sha256.Sum256(data)
		h.Write(sum[:])
		return data, nil
	}
	var err error
	if fs.cert, err = readOne(r.cfg.CertFile); err != nil {
		return fs, [32]byte{}, err
	}
	if fs.key, err = readOne(r.cfg.KeyFile); err != nil {
		return fs, [32]byte{}, err
	}
	for _, name := range r.cfg.CAFiles {
		if name == "" {
			continue
		}
		data, err := readOne(name)
		if err != nil {
			return fs, [32]byte{}, err
		}
		fs.cas = append(fs.cas, data)
	}
	return fs, [32]byte(h.Sum(nil)), nil
}

// install parses files and makes them current. Called with mu held; the
// stamp is recorded whether or not they load.
func (r *Reloader) install(files fileSet, stamp [sha256.Size]byte) error {
	r.stamp = stamp
	m, err := r.parse(files)
	if err != nil {
		return err
	}
	r.cur.Store(m)
	return nil
}

func (r *Reloader) parse(files fileSet) (*material, error) {
	cert, err := x509KeyPair(files.cert, files.key)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", r.cfg.CertFile, r.cfg.KeyFile, err)
	}
	now := r.now()
	if err := checkValidity(cert.Leaf, now); err != nil {
		return nil, fmt.Errorf("%s: %w", r.cfg.CertFile, err)
	}
	m := &material{cert: cert}
	if len(files.cas) > 0 {
		m.pool = x509.NewCertPool()
		for i, data := range files.cas {
			certs, err := parseCertificates(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.caName(i), err)
			}
			for _, c := range certs {
				m.pool.AddCert(c)
			}
		}
	}
	if r.cfg.CertFromCA {
		var inter []*x509.Certificate
		for _, der := range cert.Certificate[1:] {
			c, err := x509.ParseCertificate(der) // parsed once already by x509KeyPair
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.cfg.CertFile, err)
			}
			inter = append(inter, c)
		}
		if _, err := verifyChain(m.pool, cert.Leaf, inter, "", x509.ExtKeyUsageAny, now); err != nil {
			return nil, fmt.Errorf("%s: %w: %v", r.cfg.CertFile, ErrNotFromCA, err)
		}
	}
	if r.cfg.Check != nil {
		if err := r.cfg.Check(cert.Leaf); err != nil {
			return nil, fmt.Errorf("%s: %w", r.cfg.CertFile, err)
		}
	}
	if _, err := rand.Read(m.ticketKey[:]); err != nil {
		return nil, fmt.Errorf("tlsconf: session ticket key: %w", err)
	}
	return m, nil
}

// caName is the name of the i-th non-empty CA file.
func (r *Reloader) caName(i int) string {
	for _, f := range r.cfg.CAFiles {
		if f == "" {
			continue
		}
		if i == 0 {
			return f
		}
		i--
	}
	return ""
}
