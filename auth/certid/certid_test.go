package certid

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"
)

func TestPrincipal(t *testing.T) {
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name string
		cert *x509.Certificate
		want string
		ok   bool
	}{
		{"node", &x509.Certificate{URIs: []*url.URL{u("logd://node/n1")}, Subject: pkix.Name{CommonName: "n1"}}, "Node:n1", true},
		{"user uri wins over cn", &x509.Certificate{URIs: []*url.URL{u("logd://user/alice")}, Subject: pkix.Name{CommonName: "bob"}}, "User:alice", true},
		{"cn", &x509.Certificate{Subject: pkix.Name{CommonName: "bob"}}, "User:bob", true},
		{"bad node id falls back to cn", &x509.Certificate{URIs: []*url.URL{u("logd://node/")}, Subject: pkix.Name{CommonName: "carol"}}, "User:carol", true},
		{"nothing", &x509.Certificate{}, "", false},
		{"cn with a space", &x509.Certificate{Subject: pkix.Name{CommonName: "a b"}}, "", false},
		{"nil", nil, "", false},
	}
	for _, c := range cases {
		p, ok := Principal(c.cert)
		if ok != c.ok || (ok && p.String() != c.want) {
			t.Errorf("%s: CertPrincipal = %v, %v; want %s, %v", c.name, p, ok, c.want, c.ok)
		}
	}
}
