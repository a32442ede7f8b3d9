package client

import (
	"errors"
	"fmt"
)

// Work-queue errors. ErrStaleToken (errors.go) is the error of a token that
// is no longer the current delivery's.
var (
	// ErrUnknownQueueGroup: the queue group does not exist on the topic.
	ErrUnknownQueueGroup = errors.New("logd: unknown queue group")
	// ErrQueueGroupExists: CreateQueueGroup of a group that exists.
	ErrQueueGroupExists = errors.New("logd: queue group exists")
)

// permanentError marks a handler error as permanent.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as a permanent failure: a Worker then nacks the
// record permanently, so it is dead-lettered at once (reason "rejected")
// instead of retried. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err (or an error it wraps) was marked with
// Permanent.
func IsPermanent(err error) bool {
	var pe *permanentError
	return errors.As(err, &pe)
}

// TokenError reports the tokens of an Ack, Nack or Extend call that were
// refused while others were accepted. errors.Is(err, ErrStaleToken) holds
// when any was stale.
type TokenError struct {
	// Refused maps each refused token to its reason.
	Refused map[string]error
}

func (e *TokenError) Error() string {
	for tok, err := range e.Refused {
		if len(e.Refused) == 1 {
			return fmt.Sprintf("token %s: %v", tok, err)
		}
		return fmt.Sprintf("%d tokens refused, e.g. %s: %v", len(e.Refused), tok, err)
	}
	return "no token refused"
}

// Unwrap returns the refusals, so errors.Is finds ErrStaleToken.
func (e *TokenError) Unwrap() []error {
	out := make([]error, 0, len(e.Refused))
	for _, err := range e.Refused {
		out = append(out, err)
	}
	return out
}
