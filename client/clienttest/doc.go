// Package clienttest provides an in-memory logd server for tests of code
// that uses package client (the client itself, logctl, applications).
//
// The fake speaks the real Connect API over HTTP (httptest) and follows the
// server's conventions: error codes with an ErrorInfo detail, long-polling
// fetches, next offsets, server timestamps for records without one, and
// Kafka's murmur2 partitioner for keyed records. It has no replication, no
// persistence and no retention beyond Truncate. Faults are injected per
// method with Intercept and FailNext, and calls are counted with Calls.
package clienttest
