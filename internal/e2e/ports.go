package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// handedOut holds every address FreeAddr or ClaimAddr gave out in this
// test process: a
// port is free when probed but the kernel may offer it again to the next
// probe before the first process binds it (seen as two nodes of one
// cluster given the same port).
var handedOut sync.Map

// FreeAddr returns a 127.0.0.1 address whose port was free when probed
// and that it never returned before in this test process.
//
// The ports come from below Linux's default ephemeral range (32768-60999):
// a port the kernel hands out for ":0" listeners or as the source port of
// an outgoing connection (other test packages run beside this one, and
// the nodes and proxies dial each other all the time) can be taken in the
// moment between the probe and the node's bind, which failed a node's
// start with "address already in use". Below the range only another
// explicit bind competes for it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if addr := fmt.Sprintf("127.0.0.1:%d", port); ClaimAddr(addr) {
			return addr
		}
	}
	t.Fatal("no unused port after 1000 tries")
	return ""
}

// ClaimAddr reports whether addr (host:port) can be bound now and was not
// given out before in this test process, and if so gives it out: FreeAddr
// will not return it. A test that picks its own ports (a script's fixed
// layout, say) claims them so the harness's nodes do not take them.
func ClaimAddr(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false // in use
	}
	ln.Close()
	_, dup := handedOut.LoadOrStore(addr, true)
	return !dup
}
