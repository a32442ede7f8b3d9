package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCalls: a call reaches the other port's handler with the group and
// the caller's proven id, and brings back its answer; a handler's error
// and a caller that is no member of the cluster are refused; a call
// without a handler is refused; a call whose caller gives up ends the
// handler's context.
func TestCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	member := func(id string) bool { return id == "n2" }
	server := newPort(t, "n1", secretA, nil, member, 0)
	client := newPort(t, "n2", secretA, nil, anyone, 0)
	stranger := newPort(t, "n9", secretA, nil, anyone, 0)
	addr := server.Addr().String()

	if _, err := client.Call(ctx, addr, 3, []byte("x")); !errors.Is(err, ErrCallRefused) || errors.Is(err, ErrCallUnanswered) {
		t.Errorf("call before a handler: %v, want ErrCallRefused", err)
	}
	ended := make(chan error, 1)
	server.HandleCalls(func(hctx context.Context, peer string, group uint64, req []byte) ([]byte, error) {
		switch string(req) {
		case "fail":
			return nil, errors.New("no such thing")
		case "block":
			<-hctx.Done()
			ended <- hctx.Err()
			return nil, hctx.Err()
		}
		return fmt.Appendf(nil, "%s/%d/%s", peer, group, req), nil
	})
	got, err := client.Call(ctx, addr, 7, []byte("hello"))
	if err != nil || string(got) != "n2/7/hello" {
		t.Errorf("call: %q, %v; want n2/7/hello", got, err)
	}
	big := bytes.Repeat([]byte{'z'}, 3<<20)
	got, err = client.Call(ctx, addr, 1, big)
	if err != nil || len(got) != len(big)+len("n2/1/") {
		t.Errorf("a 3 MiB call: %d bytes, %v", len(got), err)
	}
	if _, err := client.Call(ctx, addr, 7, []byte("fail")); !errors.Is(err, ErrCallRefused) || !strings.Contains(err.Error(), "no such thing") {
		t.Errorf("a handler's error: %v", err)
	}
	if _, err := stranger.Call(ctx, addr, 7, []byte("hello")); !errors.Is(err, ErrCallRefused) || !strings.Contains(err.Error(), "not a member") {
		t.Errorf("a call from a node that is no member: %v", err)
	}
	if _, err := client.Call(ctx, addr, callBit|1, nil); err == nil {
		t.Error("a call naming a group with the call bit went out")
	}
	cctx, ccancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer ccancel()
	if _, err := client.Call(cctx, addr, 1, []byte("block")); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrCallUnanswered) {
		t.Errorf("a call past its deadline: %v, want ErrCallUnanswered and the deadline", err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the handler's context ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the handler's context did not end when the caller gave up")
	}
}
