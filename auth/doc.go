// Package auth is logd's authorization model: who makes a call (Principal),
// what a call needs (Permission), what is granted (ACL, in Kafka's model:
// principal, resource, pattern, operation, allow or deny, deny wins) and
// how bearer tokens are checked without storing their secret (Verifier).
//
// It is pure and depends on the standard library only: the state machine
// replicates ACLs and verifiers, front ends authenticate callers and ask a
// Set whether a principal holds a permission. Randomness comes from the
// caller (NewToken takes an io.Reader), so the package stays deterministic.
// docs/security.md describes the model and how front ends use it.
package auth
