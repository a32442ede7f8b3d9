// Package client is the Go client of logd, a replicated, partitioned,
// append-only log.
//
// A Client talks to one node at a time over the Connect API. Any node
// accepts any call: writes are forwarded to the Raft leader and
// acknowledged only once committed by a quorum and applied; reads are
// served from the node's applied state, so a follower may lag the leader
// by a little. The client learns the members from its answers, moves to
// the leader when a node could not forward a write, and to another member
// when a node fails (leader.go).
//
//	c, err := client.New("127.0.0.1:7070", client.Options{})
//	...
//	defer c.Close()
//	res, err := c.Produce(ctx, "orders", []client.Record{{Key: []byte("42"), Value: []byte("hello")}})
//
// # Errors
//
// Every failure the server explains wraps one sentinel of errors.go
// (ErrUnknownTopic, ErrNotLeader, ...), tested with errors.Is; failures with
// data are the types OutOfRangeError, OverloadedError and NotLeaderError,
// taken with errors.As. The error text keeps the server's message, and
// connect.CodeOf still gives the status code. IsRetryable says whether a
// call may succeed later.
//
// # Retries
//
// Calls are retried under Options.Retry (capped exponential backoff with
// equal jitter, retries for up to ten seconds by default so that a call
// rides out a leader election, a bounded number of attempts, the server's
// retry-after hint honoured, bounds of their own for refusals for overload
// when asked (RetryPolicy.MaxOverloadWait to wait out backpressure,
// RetryPolicy.FailOverloaded to fail at once), an optional deadline over
// all attempts, and a retry budget shared by the client's calls). Reads,
// and writes whose
// repetition changes nothing more (offset commits, acks, nacks, extends,
// alters, pauses, group membership calls, a Produce whose records all
// carry an idempotency key), retry on every retryable error. Other writes
// (Produce without keys, CreateTopic, DeleteTopic, Claim, ...) retry only
// when the server guarantees that nothing was written: ErrNotLeader,
// ErrOverloaded, or a request that never completely reached it (the
// connection could not be made, or broke while the request was written).
//
// After ErrUnavailable, a timeout or a lost connection a write may or may
// not have happened. Such an outcome stays unknown: unless a later attempt
// succeeds (a keyed Produce's retry returns the original offsets of
// whatever was written, marked Duplicate), the call's error is
// ErrOutcomeUnknown (an *OutcomeUnknownError naming the last attempt's
// failure too), even when later attempts failed in ways that wrote
// nothing. Reads never end in ErrOutcomeUnknown.
//
// # Security
//
// Options.TLS makes the client speak HTTPS (HTTP/2 by ALPN) and present a
// client certificate for mutual TLS; Options.Token or Options.TokenSource
// sends a bearer token with every call and every retry. WhoAmI says which
// principal the node sees; CreateToken, ListTokens, RevokeToken,
// CreateACLs, ListACLs and DeleteACLs manage tokens and ACLs
// (docs/security.md). A refusal is an *AuthError: ErrUnauthenticated (no
// credentials, or refused ones, a client certificate refused at the TLS
// handshake included) or ErrPermissionDenied (its Permission and Principal
// say what was missing). Neither is retried, nor is a certificate that
// either side refuses.
//
// # Reading
//
// Fetch reads one batch of a partition and may long-poll. A Consumer reads
// one partition from a start offset (or OffsetEarliest / OffsetLatest),
// following the server's next offset. OffsetForTime asks the server's time
// index for the first batch whose newest record is at or after a time, as
// Kafka does, and returns that batch's first offset: records of the batch
// may be older.
// NewGroupConsumer reads as a member of a consumer group, and NewWorker
// works a queue group's records under leases.
//
// Fetches ask the server for the record batches it stores (Kafka
// RecordBatch v2, compressed ones still compressed) and decode them here
// with package batch, the codec the server and its log use: the server
// then decodes nothing. The records are those a fetch of records gives;
// a server of an older build answers records, which are read as well.
// Options.FetchRecords asks for records instead.
//
// Timestamps have millisecond precision; the zero time.Time means "let the
// server stamp it". Key and Value distinguish nil (null) from empty.
//
// Package logdtest runs a real logd node in process for tests of code that
// uses this package.
package client
