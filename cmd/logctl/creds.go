package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"strings"
)

// tlsFlags are the global TLS flags: PEM file names.
type tlsFlags struct {
	ca, cert, key string
}

// maxCredentialFile bounds what logctl reads of a token or PEM file: a
// wrong path (a log, a disk image) fails fast instead of filling memory.
const maxCredentialFile = 1 << 20

// setting is a global option's value, from its flag or else from its
// environment variable, with the name to blame in messages.
type setting struct {
	value, name string
}

// setting returns the flag's value if given, else the variable's, else
// the active context's value of ctxKey.
func (o *globalOpts) setting(flagValue, flag, env, ctxKey string) setting {
	if flagValue != "" {
		return setting{flagValue, flag}
	}
	if v := o.getenv(env); v != "" {
		return setting{v, env}
	}
	return o.contextSetting(ctxKey)
}

// readCredential reads a credential file named by s.
func readCredential(s setting) ([]byte, error) {
	f, err := os.Open(s.value)
	if err != nil {
		return nil, usagef("%s: %v", s.name, err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxCredentialFile+1)); err != nil {
		return nil, usagef("%s: %v", s.name, err)
	}
	if buf.Len() > maxCredentialFile {
		return nil, usagef("%s %s: larger than %d bytes; not a credential file", s.name, s.value, maxCredentialFile)
	}
	return buf.Bytes(), nil
}

// bearerToken returns the token to send, if any: --token or --token-file,
// else LOGCTL_TOKEN or LOGCTL_TOKEN_FILE, else the context's token file.
// Flags win over the environment as a pair, so a --token-file is not
// overridden by a LOGCTL_TOKEN left in the environment; giving both of a
// pair is refused.
func (o *globalOpts) bearerToken() (string, error) {
	tok, file := setting{o.token, "--token"}, setting{o.tokenFile, "--token-file"}
	if tok.value == "" && file.value == "" {
		tok, file = setting{o.getenv("LOGCTL_TOKEN"), "LOGCTL_TOKEN"}, setting{o.getenv("LOGCTL_TOKEN_FILE"), "LOGCTL_TOKEN_FILE"}
	}
	if tok.value == "" && file.value == "" {
		file = o.contextSetting("token_file")
	}
	switch {
	case tok.value != "" && file.value != "":
		return "", usagef("give %s or %s, not both", tok.name, file.name)
	case tok.value != "":
		return strings.TrimSpace(tok.value), nil
	case file.value == "":
		return "", nil
	}
	b, err := readCredential(file)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", usagef("%s %s is empty", file.name, file.value)
	}
	return t, nil
}

// tlsConfig returns the client's TLS configuration, or nil for plain
// HTTP. TLS is on when the server is an https:// URL or a CA or client
// certificate is given; a "host:port" server then means https.
func (o *globalOpts) tlsConfig() (*tls.Config, error) {
	ca := o.setting(o.tls.ca, "--tls-ca", "LOGCTL_TLS_CA", "tls_ca")
	cert := o.setting(o.tls.cert, "--tls-cert", "LOGCTL_TLS_CERT", "tls_cert")
	key := o.setting(o.tls.key, "--tls-key", "LOGCTL_TLS_KEY", "tls_key")
	server := strings.ToLower(strings.TrimSpace(o.addr))
	if ca.value == "" && cert.value == "" && key.value == "" && !strings.HasPrefix(server, "https://") {
		return nil, nil
	}
	if strings.HasPrefix(server, "http://") {
		return nil, usagef("server %s is plain http:// but TLS settings are given; use an https:// URL or host:port", o.addr)
	}
	if (cert.value == "") != (key.value == "") {
		return nil, usagef("a client certificate needs both --tls-cert and --tls-key (or LOGCTL_TLS_CERT and LOGCTL_TLS_KEY)")
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca.value != "" {
		pem, err := readCredential(ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("%s %s: no PEM certificate in it", ca.name, ca.value)
		}
		conf.RootCAs = pool
	}
	if cert.value != "" {
		certPEM, err := readCredential(cert)
		if err != nil {
			return nil, err
		}
		keyPEM, err := readCredential(key)
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, usagef("%s %s with %s %s: %v", cert.name, cert.value, key.name, key.value, err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}
