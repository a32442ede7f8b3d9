package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/yamux"
)

// Calls. Besides Raft's connections, a session carries calls: one request
// and one answer on a stream of their own, for a group, between members
// of the cluster, authenticated as the session is. A node that does not
// lead a data group hands the group's leader a command to propose this
// way (package replication). A call's stream names its group with
// callBit set, so a build that knows no calls refuses it as a group it
// does not run.
//
// On the wire, after the 8-byte group id: the request's length (4 bytes,
// big-endian) and bytes; the answer is a status byte (callOK, or
// callRefused with a message as the answer), its length and bytes.

// callBit marks the group id of a call's stream.
const callBit = uint64(1) << 63

// MaxCallBytes bounds a call's request and its answer.
const MaxCallBytes = 64 << 20

// The answer's status byte.
const (
	callOK      = 0
	callRefused = 1
)

// ErrCallUnanswered is a call whose request was sent whole and whose
// answer never came (the connection broke, or the caller gave up): the
// other end may have acted on it.
var ErrCallUnanswered = errors.New("raft port: call sent, no answer")

// ErrCallRefused is a call the port at the other end refused (no handler,
// not a member, too large); the handler's own errors are its answer's
// business.
var ErrCallRefused = errors.New("raft port: call refused")

// CallHandler answers a call for group from node peer ("" when the
// session proved no node id). Its answer is at most MaxCallBytes; an
// error refuses the call with its text.
type CallHandler func(ctx context.Context, peer string, group uint64, req []byte) ([]byte, error)

// afterAnswerKey carries, in a handler's context, what runs once the
// call's answer was written (AfterAnswer).
type afterAnswerKey struct{}

// AfterAnswer registers f to run once the answer of the call whose
// handler ctx is was written to the caller (or the call ended without
// one): a handler that charged memory for its answer releases it then,
// not when it returns the bytes. It reports false, registering nothing,
// for a context that is not a call's (the caller then releases at once).
func AfterAnswer(ctx context.Context, f func()) bool {
	after, ok := ctx.Value(afterAnswerKey{}).(*[]func())
	if ok {
		*after = append(*after, f)
	}
	return ok
}

// HandleCalls sets the handler of calls to this port; calls before it
// are refused.
func (p *Port) HandleCalls(h CallHandler) { p.calls.Store(&h) }

// Call sends req to the port at addr for group and returns the answer.
// The call ends with ctx (its deadline bounds the whole exchange).
func (p *Port) Call(ctx context.Context, addr string, group uint64, req []byte) ([]byte, error) {
	if group&callBit != 0 {
		return nil, fmt.Errorf("raft port: call for group %d: id out of range", group)
	}
	if len(req) > MaxCallBytes {
		return nil, fmt.Errorf("%w: request of %d bytes, at most %d", ErrCallRefused, len(req), MaxCallBytes)
	}
	sess, err := p.session(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("raft session to %s: %w", addr, err)
	}
	st, err := sess.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("raft stream to %s: %w", addr, err)
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.SetDeadline(time.Now()) })
	defer stop()
	head := make([]byte, 12, 12+len(req))
	binary.BigEndian.PutUint64(head, group|callBit)
	binary.BigEndian.PutUint32(head[8:], uint32(len(req)))
	if _, err := st.Write(append(head, req...)); err != nil {
		// The other end acts only on a whole request; a write that
		// failed may have sent part of it, never all (yamux delivers a
		// write in order, and its error says some of it is unsent).
		return nil, callErr(ctx, addr, err)
	}
	var status [5]byte
	if _, err := io.ReadFull(st, status[:]); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCallUnanswered, callErr(ctx, addr, err))
	}
	n := binary.BigEndian.Uint32(status[1:])
	if n > MaxCallBytes {
		return nil, fmt.Errorf("raft call to %s: answer of %d bytes, at most %d", addr, n, MaxCallBytes)
	}
	ans := make([]byte, n)
	if _, err := io.ReadFull(st, ans); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCallUnanswered, callErr(ctx, addr, err))
	}
	if status[0] != callOK {
		return nil, fmt.Errorf("%w by %s: %s", ErrCallRefused, addr, ans)
	}
	return ans, nil
}

// callErr is a failed call's error: ctx's when it ended.
func callErr(ctx context.Context, addr string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("raft call to %s: %w", addr, ctx.Err())
	}
	return fmt.Errorf("raft call to %s: %w", addr, err)
}

// serveCall answers the call on st for group from peerID: the caller must
// be a member of the cluster (of group 0, every member's) when the
// session proved who it is.
func (p *Port) serveCall(st *yamux.Stream, peerID string, group uint64, deadline time.Time) {
	defer st.Close()
	refuse := func(msg string) {
		ans := make([]byte, 5, 5+len(msg))
		ans[0] = callRefused
		binary.BigEndian.PutUint32(ans[1:], uint32(len(msg)))
		st.Write(append(ans, msg...))
	}
	h := p.calls.Load()
	if h == nil {
		refuse("this node takes no calls")
		return
	}
	if peerID != "" {
		l, err := p.layer(0, deadline)
		if err != nil || !l.member(peerID) {
			refuse("not a member")
			return
		}
	}
	st.SetReadDeadline(deadline)
	var n [4]byte
	if _, err := io.ReadFull(st, n[:]); err != nil {
		return
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > MaxCallBytes {
		refuse(fmt.Sprintf("request of %d bytes, at most %d", size, MaxCallBytes))
		return
	}
	req := make([]byte, size)
	st.SetReadDeadline(time.Now().Add(p.handshake + time.Duration(size/(1<<20))*time.Second))
	if _, err := io.ReadFull(st, req); err != nil {
		return
	}
	st.SetReadDeadline(time.Time{})
	// The call ends when the caller gives up (its stream closes) or the
	// port closes.
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	go func() {
		var one [1]byte
		st.Read(one[:])
		cancel()
	}()
	var after []func()
	defer func() {
		for _, f := range after {
			f()
		}
	}()
	ctx = context.WithValue(ctx, afterAnswerKey{}, &after)
	ans, err := (*h)(ctx, peerID, group, req)
	if err != nil {
		refuse(err.Error())
		return
	}
	if len(ans) > MaxCallBytes {
		refuse(fmt.Sprintf("answer of %d bytes, at most %d", len(ans), MaxCallBytes))
		return
	}
	var head [5]byte
	head[0] = callOK
	binary.BigEndian.PutUint32(head[1:], uint32(len(ans)))
	// Two writes, not a copy of the answer behind its header.
	if _, err := st.Write(head[:]); err == nil {
		st.Write(ans)
	}
}
