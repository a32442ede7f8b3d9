// Package console serves logd's web console (docs/console.md): static
// assets embedded in the binary, which talk to the node through the same
// Connect API (JSON over HTTP) as every other client. The console has no
// backend of its own: what it shows and changes is what the API answers
// and allows the caller's principal.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// ContentSecurityPolicy is sent with every console answer. Scripts and
// styles come from the node only and no inline script runs, so a record
// value or a topic name shown by the console can never execute: the pages
// also write data as text, never as markup (assets/ui.js).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; manifest-src 'self'; base-uri 'none'; " +
	"form-action 'none'; frame-ancestors 'none'"

//go:embed assets
var embedded embed.FS

// file is one asset, read once at start.
type file struct {
	body []byte
	etag string
}

// Handler serves the console's assets under Prefix (mounted on a
// ServeMux, which redirects /ui to /ui/). Only GET and HEAD are answered. Every answer carries the
// security headers; assets are revalidated by ETag on each load, so a
// node upgraded in place serves its new console at once.
func Handler() http.Handler {
	files := loadFiles()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		f, ok := files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("ETag", f.etag)
		if ct := contentType(name); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
	})
}

// setSecurityHeaders sets the headers every console answer carries.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// contentType names the types of the console's own files, so they do not
// depend on the host's MIME tables.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".json", ".webmanifest":
		return "application/json"
	}
	return ""
}

// loadFiles reads every embedded asset, keyed by its path under assets/.
func loadFiles() map[string]file {
	files := make(map[string]file)
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		files[p] = file{body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(err) // embedded files are always readable
	}
	return files
}
