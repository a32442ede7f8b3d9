package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	stdlog "log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/testcerts"
)

// TestHTTPRequiresANodeCertificate: under peer TLS, a call to a peer's
// API port reaches a server that presents a node certificate of the
// cluster CA, and is refused by one that presents any other certificate
// of that CA valid for the address, before anything is sent; TLS.Client
// alone would accept it.
func TestHTTPRequiresANodeCertificate(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	p := tlsFor(ca, ca.Node(t, "n1"))
	for _, tc := range []struct {
		name   string
		server tls.Certificate
		ok     bool
	}{
		{"a node", ca.Node(t, "n2"), true},
		{"a service certificate of the cluster CA", ca.Service(t, "mallory"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reached atomic.Bool
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Store(true) }))
			srv.TLS = ca.OptionalClientConfig(tc.server)
			srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0)
			srv.StartTLS()
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "https://")
			call := func(h HTTP) error {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				tr := h.Transport(2*time.Second, false)
				defer tr.CloseIdleConnections()
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL(addr)+"/", nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := (&http.Client{Transport: tr}).Do(req)
				if err != nil {
					return err
				}
				resp.Body.Close()
				return nil
			}
			err := call(NewHTTP(nil, p))
			switch {
			case tc.ok && err != nil:
				t.Fatalf("call to a node: %v", err)
			case !tc.ok && !errors.Is(err, ErrNotNode):
				t.Fatalf("call to a server that is not a node: %v, want %v", err, ErrNotNode)
			case !tc.ok && reached.Load():
				t.Fatal("the request reached a server that is not a node")
			}
			// Without the check (the client configuration alone), the
			// same server is accepted: the check is what refuses it.
			if err := call(HTTP{TLS: p.Client}); err != nil {
				t.Fatalf("TLS.Client alone: %v", err)
			}
		})
	}
}
