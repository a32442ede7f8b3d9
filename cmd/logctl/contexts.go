package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// A context names a cluster and the credentials to reach it, like `nats
// context` or `rpk profile`: the server, TLS files and a token file. It
// holds file names, never a secret: a token stays in its file, where the
// operating system's permissions guard it, and `context list` can be
// shown to anyone. The contexts live in one JSON file,
// contextsFileName under os.UserConfigDir()/logctl, written by `logctl
// context add|use|remove`.
//
// Each setting is taken from the first of: its flag, its environment
// variable, the context (--context, else LOGCTL_CONTEXT, else the file's
// current context), the default. A flag or variable thus always wins over
// the context, so a context never surprises a script that says what it
// wants. The current context is not used at all when a server is given by
// --server or a variable: that is another cluster, and the context's
// credentials are not sent there; a context named by --context or
// LOGCTL_CONTEXT is (a --server then picks one node of its cluster).

// contextsFileName is the contexts file in the user's logctl config dir.
const contextsFileName = "contexts.json"

// errUnknownContext: no context of that name (exit 3).
var errUnknownContext = errors.New("no such context")

// contextNameRE: names are safe in file names, shells and tables.
var contextNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// contextEntry is one context. File names are absolute.
type contextEntry struct {
	Server      string `json:"server"`
	TLSCA       string `json:"tls_ca,omitempty"`
	TLSCert     string `json:"tls_cert,omitempty"`
	TLSKey      string `json:"tls_key,omitempty"`
	TokenFile   string `json:"token_file,omitempty"`
	Description string `json:"description,omitempty"`
}

// contextFile is the contexts file.
type contextFile struct {
	// Current is the context used when neither --context nor
	// LOGCTL_CONTEXT names one; empty for none.
	Current  string                  `json:"current,omitempty"`
	Contexts map[string]contextEntry `json:"contexts"`
}

// contextsPath returns the contexts file's name.
func contextsPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("contexts: %w", err)
	}
	return filepath.Join(dir, "logctl", contextsFileName), nil
}

// loadContexts reads the contexts file at path; a missing file is no
// contexts. Unknown fields (a "token" with a secret in it, a typo) and
// contexts without a server are errors, so a broken file is noticed
// rather than half used.
func loadContexts(path string) (*contextFile, error) {
	cf := &contextFile{Contexts: map[string]contextEntry{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cf, nil
	}
	if err != nil {
		return nil, fmt.Errorf("contexts file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cf); err != nil {
		return nil, fmt.Errorf("contexts file %s: %w", path, err)
	}
	if cf.Contexts == nil {
		cf.Contexts = map[string]contextEntry{}
	}
	for name, e := range cf.Contexts {
		if e.Server == "" {
			return nil, fmt.Errorf("contexts file %s: context %q has no server", path, name)
		}
	}
	if _, ok := cf.Contexts[cf.Current]; cf.Current != "" && !ok {
		return nil, fmt.Errorf("contexts file %s: the current context %q is not in it", path, cf.Current)
	}
	return cf, nil
}

// save writes the file whole: to a temporary file beside it, then renamed
// over it, so a reader never sees half of it. Only the user may read it
// (it names credential files).
func (cf *contextFile) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("contexts file: %w", err)
	}
	b, err := json.MarshalIndent(cf, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), contextsFileName+".*")
	if err != nil {
		return fmt.Errorf("contexts file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing is there
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("contexts file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("contexts file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("contexts file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("contexts file: %w", err)
	}
	return nil
}

// names returns the contexts' names, sorted.
func (cf *contextFile) names() []string {
	names := make([]string, 0, len(cf.Contexts))
	for n := range cf.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// unknown returns errUnknownContext for name, with the names there are.
func (cf *contextFile) unknown(name string) error {
	if len(cf.Contexts) == 0 {
		return fmt.Errorf("context %q: %w (there are none; add one with logctl context add)", name, errUnknownContext)
	}
	return fmt.Errorf("context %q: %w (there are: %s)", name, errUnknownContext, strings.Join(cf.names(), ", "))
}

// loadActiveContext loads the context this call uses, if any: --context,
// else LOGCTL_CONTEXT, else the file's current context. A context named
// by the flag or the variable must exist.
func (o *globalOpts) loadActiveContext() error {
	name, from := o.contextName, "--context"
	if name == "" {
		name, from = o.getenv("LOGCTL_CONTEXT"), "LOGCTL_CONTEXT"
	}
	path, err := contextsPath()
	if err != nil {
		if name != "" {
			return fmt.Errorf("%s %s: %w", from, name, err)
		}
		return nil // no config dir: no contexts
	}
	cf, err := loadContexts(path)
	if err != nil {
		return err
	}
	if name == "" {
		if o.server != "" || o.getenv("LOGCTL_SERVER") != "" || o.getenv("LOGD_SERVER") != "" {
			// A server given without a context is another cluster: the
			// current context's credentials are not sent there.
			return nil
		}
		name = cf.Current
	}
	if name == "" {
		return nil
	}
	e, ok := cf.Contexts[name]
	if !ok {
		return fmt.Errorf("%s: %w", from, cf.unknown(name))
	}
	o.ctxName, o.ctx = name, &e
	return nil
}

// contextValue returns the active context's value of a setting (by its
// JSON name), "" when there is no context or it has none.
func (o *globalOpts) contextValue(key string) string {
	if o.ctx == nil {
		return ""
	}
	switch key {
	case "server":
		return o.ctx.Server
	case "tls_ca":
		return o.ctx.TLSCA
	case "tls_cert":
		return o.ctx.TLSCert
	case "tls_key":
		return o.ctx.TLSKey
	case "token_file":
		return o.ctx.TokenFile
	}
	return ""
}

// contextSetting is a setting taken from the active context, named for
// messages.
func (o *globalOpts) contextSetting(key string) setting {
	if v := o.contextValue(key); v != "" {
		return setting{v, fmt.Sprintf("context %s's %s", o.ctxName, key)}
	}
	return setting{}
}
