package faults

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/logd-dev/logd/log"
)

// PowerCutFS is a log.FS that records what a power cut would keep of the
// files written through it: each file's size as of its last Sync (its size
// when first opened for writing, if it existed then), and whether its
// directory entry was made durable by a SyncDir since it was created.
// Every change is appended to a journal file before the operation that
// depends on it returns, so the journal survives the process's death as
// the page cache does. OpenPowerCut, at the next start, cuts the files to
// what the journal says is durable.
//
// Reads and writes go to the inner file system unchanged: while the
// process lives it sees every byte it wrote, as it would with a page
// cache.
type PowerCutFS struct {
	inner log.FS

	mu sync.Mutex // guards the fields below and orders journal lines
	// journal is appended to, one line per change (journalLine).
	journal *os.File
	// files are the tracked files by current name.
	files map[string]*pcNode
	err   error // a failed journal write: sticky, every mutation fails
}

// pcNode is a tracked file. A rename moves the node, so a handle opened
// before the rename still updates the file under its new name.
type pcNode struct {
	name    string
	synced  int64 // durable bytes
	durable bool  // the directory entry survives a power cut
	gone    bool  // removed, or renamed over
}

var _ log.FS = (*PowerCutFS)(nil)

// CutReport says what OpenPowerCut cut.
type CutReport struct {
	// Files is the number of files removed because their creation was
	// never made durable.
	Files int
	// Bytes is the number of bytes cut from the ends of files.
	Bytes int64
	// Truncated is the number of files cut short.
	Truncated int
}

// OpenPowerCut returns a PowerCutFS over inner that journals to the file
// journal. If journal exists, a previous process journaled there and died
// or stopped: first every file it names is cut back to its durable state
// (through inner), as a power cut at the moment of its last line would
// have left it, and the report says what was cut. The journal then starts
// afresh. Call Close when the process stops cleanly.
func OpenPowerCut(inner log.FS, journal string) (*PowerCutFS, CutReport, error) {
	rep, err := cutFromJournal(inner, journal)
	if err != nil {
		return nil, rep, fmt.Errorf("power cut from %s: %w", journal, err)
	}
	if err := os.MkdirAll(filepath.Dir(journal), 0o755); err != nil {
		return nil, rep, fmt.Errorf("power-cut journal: %w", err)
	}
	// The cut is done: a fresh journal describes the files as they are now,
	// all durable.
	f, err := os.OpenFile(journal, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, rep, fmt.Errorf("power-cut journal: %w", err)
	}
	return &PowerCutFS{inner: inner, journal: f, files: map[string]*pcNode{}}, rep, nil
}

// Close closes the journal. The files keep their state: the next
// OpenPowerCut cuts whatever was not synced, as a power cut after a clean
// stop would.
func (p *PowerCutFS) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.journal.Close()
}

// Journal lines; names are quoted (strconv.Quote).
const (
	opNew  = "new"  // new NAME: created, entry not durable
	opSize = "size" // size N NAME: N bytes durable
	opDir  = "dir"  // dir NAME: NAME's directory entry durable
	opRm   = "rm"   // rm NAME: removed
	opMv   = "mv"   // mv OLD NEW: renamed
)

// log appends a journal line. Callers hold p.mu.
func (p *PowerCutFS) log(op string, args ...string) error {
	if p.err != nil {
		return p.err
	}
	var b strings.Builder
	b.WriteString(op)
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(a)
	}
	b.WriteByte('\n')
	if _, err := p.journal.WriteString(b.String()); err != nil {
		p.err = fmt.Errorf("power-cut journal: %w", err)
		return p.err
	}
	return nil
}

func writable(flag int) bool { return flag&(os.O_WRONLY|os.O_RDWR) != 0 }

// OpenFile opens a file of the inner file system. A file it creates is
// not durable until its directory is synced; a file opened for writing
// that existed is durable at its current size (or 0 with O_TRUNC).
func (p *PowerCutFS) OpenFile(name string, flag int, perm fs.FileMode) (log.File, error) {
	name = filepath.Clean(name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	n := p.files[name]
	fresh := n == nil
	var created bool
	if fresh && writable(flag) {
		st, err := p.inner.Stat(name)
		switch {
		case err == nil:
			n = &pcNode{name: name, synced: st.Size(), durable: true}
		case errors.Is(err, fs.ErrNotExist) && flag&os.O_CREATE != 0:
			// Journaled before it exists: a death in between leaves a
			// line for a file that never was, which the cut skips.
			if err := p.log(opNew, strconv.Quote(name)); err != nil {
				return nil, err
			}
			n, created = &pcNode{name: name}, true
		}
	}
	f, err := p.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return f, nil // read only, untracked
	}
	if flag&os.O_TRUNC != 0 {
		n.synced = 0
	}
	if fresh && !created || flag&os.O_TRUNC != 0 {
		if err := p.log(opSize, strconv.FormatInt(n.synced, 10), strconv.Quote(name)); err != nil {
			f.Close()
			return nil, err
		}
	}
	p.files[name] = n
	return &pcFile{File: f, fs: p, node: n}, nil
}

// Remove removes a file; the removal is taken as durable at once.
func (p *PowerCutFS) Remove(name string) error {
	name = filepath.Clean(name)
	if err := p.inner.Remove(name); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.files[name]; n != nil {
		n.gone = true
		delete(p.files, name)
	}
	return p.log(opRm, strconv.Quote(name))
}

// Rename renames a file; the rename is taken as durable at once, so the
// file under its new name is as durable as its bytes.
func (p *PowerCutFS) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	if err := p.inner.Rename(oldname, newname); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.files[newname]; old != nil {
		old.gone = true
		delete(p.files, newname)
	}
	if n := p.files[oldname]; n != nil {
		delete(p.files, oldname)
		n.name, n.durable = newname, true
		p.files[newname] = n
	}
	return p.log(opMv, strconv.Quote(oldname), strconv.Quote(newname))
}

// ReadDir lists a directory of the inner file system.
func (p *PowerCutFS) ReadDir(dir string) ([]string, error) { return p.inner.ReadDir(dir) }

// MkdirAll creates directories in the inner file system (not modelled:
// directories are durable at once).
func (p *PowerCutFS) MkdirAll(dir string, perm fs.FileMode) error {
	return p.inner.MkdirAll(dir, perm)
}

// Stat stats a file of the inner file system.
func (p *PowerCutFS) Stat(name string) (fs.FileInfo, error) { return p.inner.Stat(name) }

// SyncDir syncs a directory: the entries created in it before the call
// are durable once it returns.
func (p *PowerCutFS) SyncDir(dir string) error {
	dir = filepath.Clean(dir)
	p.mu.Lock()
	var pending []*pcNode
	for _, n := range p.files {
		if !n.durable && filepath.Dir(n.name) == dir {
			pending = append(pending, n)
		}
	}
	p.mu.Unlock()
	if err := p.inner.SyncDir(dir); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range pending {
		if n.gone || n.durable {
			continue
		}
		n.durable = true
		if err := p.log(opDir, strconv.Quote(n.name)); err != nil {
			return err
		}
	}
	return p.err
}

// pcFile is a file opened for writing through a PowerCutFS.
type pcFile struct {
	log.File
	fs   *PowerCutFS
	node *pcNode
}

// Sync syncs the file: the bytes it held when Sync was called are durable
// once it returns.
func (f *pcFile) Sync() error {
	st, err := f.File.Stat()
	if err != nil {
		return err
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.node.gone {
		return f.fs.err
	}
	// Syncs of one file may overlap (the log syncs without its appenders'
	// lock): one that began earlier and ends later must not lower what a
	// later one made durable.
	f.node.synced = max(f.node.synced, st.Size())
	return f.fs.log(opSize, strconv.FormatInt(f.node.synced, 10), strconv.Quote(f.node.name))
}

// Truncate truncates the file; its durable size shrinks with it.
func (f *pcFile) Truncate(size int64) error {
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.node.gone || size >= f.node.synced {
		return f.fs.err
	}
	f.node.synced = size
	return f.fs.log(opSize, strconv.FormatInt(size, 10), strconv.Quote(f.node.name))
}

// cutFromJournal replays a journal, if there is one, and cuts the files
// it names to their durable state.
func cutFromJournal(inner log.FS, journal string) (CutReport, error) {
	var rep CutReport
	f, err := os.Open(journal)
	if errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	defer f.Close()
	files := map[string]*pcNode{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		if err := replay(files, sc.Text()); err != nil {
			return rep, fmt.Errorf("line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return rep, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n := files[name]
		st, err := inner.Stat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // never created, or removed outside the journal (a topic directory)
		}
		if err != nil {
			return rep, err
		}
		switch {
		case !n.durable:
			if err := inner.Remove(name); err != nil {
				return rep, err
			}
			rep.Files++
		case st.Size() > n.synced:
			if err := truncate(inner, name, n.synced); err != nil {
				return rep, err
			}
			rep.Truncated++
			rep.Bytes += st.Size() - n.synced
		}
	}
	return rep, nil
}

// replay applies one journal line to files.
func replay(files map[string]*pcNode, line string) error {
	op, rest, _ := strings.Cut(line, " ")
	var args []string
	for rest != "" {
		var a string
		if rest[0] == '"' {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return fmt.Errorf("%q: %w", line, err)
			}
			a, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			a, rest, _ = strings.Cut(rest, " ")
		}
		args = append(args, a)
		rest = strings.TrimPrefix(rest, " ")
	}
	want := map[string]int{opNew: 1, opSize: 2, opDir: 1, opRm: 1, opMv: 2}
	if n, ok := want[op]; !ok || len(args) != n {
		return fmt.Errorf("malformed journal line %q", line)
	}
	switch op {
	case opNew:
		files[args[0]] = &pcNode{name: args[0]}
	case opSize:
		size, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("malformed journal line %q", line)
		}
		n := files[args[1]]
		if n == nil {
			n = &pcNode{name: args[1], durable: true}
			files[args[1]] = n
		}
		n.synced = size
	case opDir:
		if n := files[args[0]]; n != nil {
			n.durable = true
		}
	case opRm:
		delete(files, args[0])
	case opMv:
		n := files[args[0]]
		delete(files, args[0])
		delete(files, args[1])
		if n != nil {
			n.name, n.durable = args[1], true
			files[args[1]] = n
		}
	}
	return nil
}

func truncate(fsys log.FS, name string, size int64) error {
	f, err := fsys.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
