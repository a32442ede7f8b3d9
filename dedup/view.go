package dedup

import (
	"slices"
	"sync/atomic"
)

// View is a window frozen at the moment View was called, for a
// snapshot: it reads memory the window no longer writes, so it may be
// encoded without the window's lock while the window changes. Release it
// when done; until then the window copies what it would overwrite.
type View struct {
	g        ring
	w        *Window
	released atomic.Bool
}

// View freezes the window. It costs a copy of one pointer per 1024
// entries, so a snapshot holds the state machine up for microseconds, not
// for an encoding of every key.
func (w *Window) View() *View {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.viewEpoch++
	w.views.Add(1)
	v := &View{g: w.ring, w: w}
	v.g.chunks = slices.Clone(w.chunks)
	v.g.blocks = slices.Clone(w.blocks)
	return v
}

// Release ends the view; the window may then reuse what it froze. Later
// calls do nothing.
func (v *View) Release() {
	if v.released.CompareAndSwap(false, true) {
		v.g = ring{}
		v.w.views.Add(-1)
	}
}
