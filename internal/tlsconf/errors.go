package tlsconf

import "errors"

// Errors of loading material and of verifying a peer. Each is wrapped
// with the file or the peer it concerns; test with errors.Is.
var (
	// ErrKeyMismatch: the private key is not the certificate's.
	ErrKeyMismatch = errors.New("tlsconf: private key does not match the certificate")
	// ErrExpired: the certificate's validity ended.
	ErrExpired = errors.New("tlsconf: certificate expired")
	// ErrNotYetValid: the certificate's validity has not begun.
	ErrNotYetValid = errors.New("tlsconf: certificate not yet valid")
	// ErrNoCertificate: a file holds no PEM certificate.
	ErrNoCertificate = errors.New("tlsconf: no certificate in file")
	// ErrNotFromCA: the certificate does not chain to the CA bundle
	// (Config.CertFromCA).
	ErrNotFromCA = errors.New("tlsconf: certificate not signed by the CA bundle")
	// ErrNoPeerCertificate: the peer presented no certificate.
	ErrNoPeerCertificate = errors.New("tlsconf: peer presented no certificate")
	// ErrNoClientCA: a server configuration verifies client
	// certificates, and the Reloader has no CA bundle to verify them
	// with.
	ErrNoClientCA = errors.New("tlsconf: no CA bundle to verify client certificates")
	// ErrInvalidName: a node id or user name that logd does not issue a
	// certificate for (ValidName).
	ErrInvalidName = errors.New("tlsconf: invalid name")
)
