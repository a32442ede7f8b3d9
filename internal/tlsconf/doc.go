// Package tlsconf holds a node's TLS material and the identities its
// certificates carry (docs/security.md).
//
// A Reloader loads a certificate, its private key and optionally CA
// bundles from files, and swaps in new material when Reload is called (on
// SIGHUP) or when Watch sees the files change. Handshakes read the
// material current at their start: ServerConfig and ClientConfig return
// configurations whose callbacks look it up per handshake, so a reload
// applies to the next handshake without restarting a listener. New files
// that do not load (a key that does not match the certificate, a
// certificate outside its validity period, a CA file without
// certificates) leave the last good material in place; Reload returns
// the error for the caller to log.
//
// Rotation: a certificate signed by a CA that a reload dropped from the
// bundle is refused at the next handshake, resumed sessions included. On
// the server side crypto/tls checks a resumed session's chain against
// the current ClientCAs, and the session-ticket key changes with every
// reload besides, so no session outlives the material it was made under;
// on the client side VerifyConnection verifies resumed sessions against
// the current pool.
//
// Identities are URI SANs, read by package auth/certid: a node
// certificate carries logd://node/<id> (the principal Node:<id>), a
// client certificate logd://user/<name> (User:<name>), and a certificate
// without a user URI names its user in the subject's common name. NewCA,
// IssueNode and IssueClient issue such certificates (logd cert).
//
// The package imports the standard library only, besides auth/certid.
package tlsconf
