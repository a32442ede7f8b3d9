package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/logd-dev/logd/console"
	"github.com/logd-dev/logd/logdtest"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestHandlerServesAssetsWithSecurityHeaders(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{})
	cases := []struct {
		method, path string
		status       int
		location     string
		contentType  string
	}{
		{"GET", "/ui/", http.StatusOK, "", "text/html; charset=utf-8"},
		{"GET", "/ui/app.js", http.StatusOK, "", "text/javascript; charset=utf-8"},
		{"GET", "/ui/style.css", http.StatusOK, "", "text/css; charset=utf-8"},
		{"HEAD", "/ui/index.html", http.StatusOK, "", "text/html; charset=utf-8"},
		{"GET", "/ui", http.StatusTemporaryRedirect, "/ui/", ""},
		{"GET", "/", http.StatusFound, "/ui/", ""},
		{"GET", "/ui/nope.js", http.StatusNotFound, "", ""},
		{"GET", "/ui/../go.mod", http.StatusTemporaryRedirect, "/go.mod", ""},
		{"GET", "/go.mod", http.StatusNotFound, "", ""},
		{"POST", "/ui/", http.StatusMethodNotAllowed, "", ""},
	}
	for _, c := range cases {
		req, err := http.NewRequest(c.method, node.URL()+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, resp.StatusCode, c.status)
			continue
		}
		if c.location != "" && resp.Header.Get("Location") != c.location {
			t.Errorf("%s %s: Location %q, want %q", c.method, c.path, resp.Header.Get("Location"), c.location)
		}
		if c.contentType != "" && resp.Header.Get("Content-Type") != c.contentType {
			t.Errorf("%s %s: Content-Type %q, want %q", c.method, c.path, resp.Header.Get("Content-Type"), c.contentType)
		}
		if strings.HasPrefix(c.path, "/ui/") && c.status != http.StatusTemporaryRedirect {
			if got := resp.Header.Get("Content-Security-Policy"); got != console.ContentSecurityPolicy {
				t.Errorf("%s %s: Content-Security-Policy %q", c.method, c.path, got)
			}
			if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("%s %s: X-Content-Type-Options %q", c.method, c.path, got)
			}
		}
	}
}

func TestAssetsRevalidateByETag(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{})
	resp, err := http.Get(node.URL() + "/ui/app.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q", etag, resp.Header.Get("Cache-Control"))
	}
	req, _ := http.NewRequest("GET", node.URL()+"/ui/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation: status %d, want 304", resp.StatusCode)
	}
}

func TestClusterPageShowsTheNode(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{})
	p := newPage(t, node)
	p.open("/cluster")
	p.waitText("#cluster-summary", "node-1")
	p.waitText("#cluster-members", "leader")
	p.waitText("#whoami", "User:ANONYMOUS")
}

// TestClusterPageShowsPlacement: with data groups, the cluster page shows
// each group's replicas, preferred and actual leader by member, and how
// many groups each member leads; without them, no such section.
func TestClusterPageShowsPlacement(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{DataGroupsPerNode: 2})
	p := newPage(t, node)
	p.open("/cluster")
	p.waitText("#cluster-groups", "Data groups")
	p.waitText(`#cluster-groups tr[data-group="2"]`, "leader, preferred")
	p.waitText("#cluster-leads", "node-1 2")
	if n := p.count("#cluster-groups tbody tr"); n != 2 {
		t.Errorf("%d group rows, want 2", n)
	}

	plain := logdtest.Start(t, logdtest.Options{})
	q := newPage(t, plain)
	q.open("/cluster")
	q.waitText("#cluster-members", "leader")
	if n := q.count("#cluster-groups h2"); n != 0 {
		t.Errorf("a node without data groups shows a data-groups section")
	}
}

// TestContentSecurityPolicyBlocksInlineScript checks that the browser
// enforces the policy: a script element with inline code, as an injected
// value would make, does not run, and the violation is reported.
func TestContentSecurityPolicyBlocksInlineScript(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{})
	p := newPage(t, node)
	p.open("/cluster")
	var ran bool
	p.eval(`(() => { const s = document.createElement('script'); s.textContent = 'window.injected = true'; document.body.appendChild(s); return window.injected === true; })()`, &ran)
	if ran {
		t.Fatal("an inline script ran despite the Content-Security-Policy")
	}
	errs := p.takeErrors()
	if len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), "Content Security Policy") {
		t.Errorf("no CSP violation logged; errors: %q", errs)
	}
}

// TestFooterNamesTheNodeOnEveryPage: the footer says which node the
// console talks to on pages other than the cluster page too.
func TestFooterNamesTheNodeOnEveryPage(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{})
	p := newPage(t, node)
	p.open("/topics")
	p.waitText("#node", "node node-1 (Leader)")
}
