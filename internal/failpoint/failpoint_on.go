//go:build faults

package failpoint

import (
	"fmt"
	"os"
	"sync"

	gofail "go.etcd.io/gofail/runtime"
)

// points holds the gofail failpoint of each name, registered on first use
// (gofail enables the terms GOFAIL_FAILPOINTS gives a name when it is
// registered, and refuses a name registered twice).
var points sync.Map // name -> *gofail.Failpoint

var registerMu sync.Mutex

func point(name string) *gofail.Failpoint {
	if fp, ok := points.Load(name); ok {
		return fp.(*gofail.Failpoint)
	}
	registerMu.Lock()
	defer registerMu.Unlock()
	if fp, ok := points.Load(name); ok {
		return fp.(*gofail.Failpoint)
	}
	fp := gofail.NewFailpoint(name)
	points.Store(name, fp)
	return fp
}

// Inject evaluates the failpoint name's terms: a panic or sleep term acts
// inside; a return term exits the process with ExitStatus. A panic is
// raised again with the failpoint's name, which gofail's own message may
// not carry, so a test can tell from the process's output where it died.
func Inject(name string) {
	defer func() {
		if r := recover(); r != nil {
			panic(fmt.Sprintf("failpoint %s: %v", name, r))
		}
	}()
	v, err := point(name).Acquire()
	if err != nil {
		return // disabled, or its terms are exhausted
	}
	fmt.Fprintf(os.Stderr, "failpoint %s: return(%v): exiting with status %d\n", name, v, ExitStatus)
	os.Exit(ExitStatus)
}
