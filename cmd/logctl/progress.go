package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Intervals of progress reports: redrawn in place on a terminal; on
// anything else (a file, a pipe, a CI log) one plain line at a time, less
// often, since each line stays.
const (
	terminalProgressInterval = 250 * time.Millisecond
	plainProgressInterval    = 5 * time.Second
)

// progress reports progress on stderr: on a terminal one line redrawn in
// place (a bar when the total is known), elsewhere a plain line every
// plainProgressInterval and a last one at Stop, never a carriage return.
// The caller updates the counters from any goroutine; Start launches the
// drawing goroutine and Stop joins it and ends the line.
type progress struct {
	w        io.Writer
	tty      bool // w is a terminal: redraw in place
	interval time.Duration
	// total is the expected amount of work in the unit of done (0 when
	// unknown); with it the report shows a bar.
	total int64
	// label names the counted things, e.g. "records".
	label string
	// note, if set, returns text to end each report with (a wait on an
	// overloaded server); it is called from the drawing goroutine.
	note func() string

	done    atomic.Int64 // work done, in the unit of total
	records atomic.Int64
	bytes   atomic.Int64

	start time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
	drawn bool // set and read only by the drawing goroutine, then by Stop after the join
}

// newProgress returns a progress report on w, or nil when enabled is false;
// a nil *progress is valid and does nothing.
func newProgress(w io.Writer, enabled bool, total int64, label string) *progress {
	if !enabled {
		return nil
	}
	p := &progress{w: w, tty: isTerminal(w), interval: plainProgressInterval, total: total, label: label}
	if p.tty {
		p.interval = terminalProgressInterval
	}
	return p
}

// Add records finished work.
func (p *progress) Add(done, records, bytes int64) {
	if p == nil {
		return
	}
	p.done.Add(done)
	p.records.Add(records)
	p.bytes.Add(bytes)
}

// Start begins drawing.
func (p *progress) Start() {
	if p == nil {
		return
	}
	p.start = time.Now()
	p.stop = make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
}

// Stop ends drawing and writes the final state: on a terminal if
// anything was drawn (then it ends the line), elsewhere always.
func (p *progress) Stop() {
	if p == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
	if p.drawn || !p.tty {
		p.draw()
		if p.tty {
			fmt.Fprintln(p.w)
		}
	}
}

func (p *progress) draw() {
	p.drawn = true
	elapsed := time.Since(p.start)
	recs, bytes := p.records.Load(), p.bytes.Load()
	rate := float64(recs) / max(elapsed.Seconds(), 1e-9)
	var b strings.Builder
	if p.tty {
		b.WriteString("\r")
	}
	if p.total > 0 {
		frac := min(float64(p.done.Load())/float64(p.total), 1)
		const width = 30
		n := int(frac * width)
		b.WriteString("[" + strings.Repeat("=", n))
		if n < width {
			b.WriteString(">" + strings.Repeat(" ", width-n-1))
		}
		fmt.Fprintf(&b, "] %3.0f%%  ", frac*100)
	}
	if p.label == bytesLabel {
		// Work counted in bytes (a backup): sizes and a byte rate.
		fmt.Fprintf(&b, "%s of %s  %s/s  %s", formatBytes(p.done.Load()), formatBytes(p.total),
			formatBytes(int64(float64(p.done.Load())/max(elapsed.Seconds(), 1e-9))), elapsed.Round(100*time.Millisecond))
	} else {
		p.drawCounts(&b, recs, bytes, rate, elapsed)
	}
	if p.note != nil {
		b.WriteString(p.note())
	}
	if p.tty {
		b.WriteString("\x1b[K") // erase what a longer earlier frame left
	} else {
		b.WriteString("\n")
	}
	io.WriteString(p.w, b.String())
}

// bytesLabel as a progress's label counts its work in bytes.
const bytesLabel = "bytes"

// drawCounts writes the records done, their bytes and the rate.
func (p *progress) drawCounts(b *strings.Builder, recs, bytes int64, rate float64, elapsed time.Duration) {
	fmt.Fprintf(b, "%d %s  ", recs, p.label)
	if bytes > 0 {
		// A caller that counts no bytes (a redrive) shows none rather
		// than "0 B".
		fmt.Fprintf(b, "%s  ", formatBytes(bytes))
	}
	fmt.Fprintf(b, "%.0f %s/s  %s", rate, p.label, elapsed.Round(100*time.Millisecond))
}

// formatBytes prints a byte count with a binary unit.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
