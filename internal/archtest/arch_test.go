package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the path of the module the table describes.
const module = "github.com/logd-dev/logd"

// arrows is the layer order of docs/architecture.md, quoted in messages.
const arrows = "cmd -> {server, kafka} -> replication -> replication/fsm -> backend -> {group, queue, dedup, retention} -> {log, batch, partition}"

// layer is a floor of the architecture. A package may import packages of
// lower layers only, and of its own layer only where its row names them.
type layer int

const (
	layerLeaf       layer = iota // helpers of the lowest floor
	layerStorage                 // storage, the batch codec, topic names
	layerState                   // pure state: groups, queues, dedup, retention plans
	layerVocabulary              // the backend's vocabulary: requests, answers, errors, interfaces
	layerMachine                 // the deterministic state machine
	layerRaft                    // the Raft side, implementing the backend
	layerAPI                     // the protobuf definitions and generated code
	layerEdge                    // front ends and the Go client: both sides of the API
	layerSupport                 // test support: a real node in process, the fault file system
	layerTop                     // binaries and tools
)

func (l layer) String() string {
	switch l {
	case layerLeaf:
		return "leaf helpers"
	case layerStorage:
		return "storage: log, batch, partition"
	case layerState:
		return "pure state: group, queue, dedup, retention"
	case layerVocabulary:
		return "vocabulary: backend"
	case layerMachine:
		return "state machine: replication/fsm"
	case layerRaft:
		return "raft: replication"
	case layerAPI:
		return "api"
	case layerEdge:
		return "front ends and client"
	case layerSupport:
		return "test support"
	case layerTop:
		return "binaries"
	}
	return fmt.Sprintf("layer(%d)", int(l))
}

// row places one package of the module. Patterns (only, onlyDeps,
// siblings) are module-relative import paths, "p/..." for p and below.
type row struct {
	path  string // relative to the module
	layer layer
	// planned: the package may not exist yet; its rules apply once it does.
	planned bool
	// pure: neither raft, the network nor randomness among its
	// dependencies, and no call that reads the clock in its code.
	pure bool
	// stdOnly: nothing outside the standard library among its dependencies,
	// except the external packages (full import patterns) listed.
	stdOnly  bool
	external []string
	// stdAllow lists the module packages a stdOnly package may depend on
	// all the same (themselves stdOnly).
	stdAllow []string
	// frontEnd: sees the backend interface only; no raft, log or
	// replication/fsm among its direct imports.
	frontEnd bool
	// support: a test helper, imported only by tests and other support
	// packages.
	support bool
	// only, when set, lists the module packages it may import directly.
	only []string
	// onlyDeps, when set, lists the module packages it may depend on,
	// directly or not.
	onlyDeps []string
	// siblings lists packages of its own layer it may import.
	siblings []string
}

// table has a row for every package of the module, and for the packages
// docs/architecture.md plans. A package without a row fails the test, and
// so does a package that docs/architecture.md's Packages table lists and
// this table does not, or the other way round (doctable_test.go): the
// document says what each package holds, this table where it sits.
var table = []row{
	{path: "cmd/logd", layer: layerTop},
	{path: "cmd/logctl", layer: layerTop, only: []string{"client", "api/...", "internal/buildinfo", "internal/backupfile"}},
	{path: "cmd/logd-demo", layer: layerTop},
	{path: "internal/archtest", layer: layerTop},

	{path: "logdtest", layer: layerSupport, support: true, siblings: []string{"log/logtest", "replication/replicationtest"}},
	// A real single-node Raft group in process, which the tests of the
	// front ends and logdtest share.
	{path: "replication/replicationtest", layer: layerSupport, support: true},
	{path: "log/logtest", layer: layerSupport, support: true},
	{path: "replication/internal/recordtest", layer: layerSupport, support: true},
	// A state machine in process for the tests of replication and its
	// sub-packages.
	{path: "replication/internal/fsmtest", layer: layerSupport, support: true, siblings: []string{"replication/internal/recordtest"}},
	{path: "internal/histcheck", layer: layerSupport, support: true, stdOnly: true, external: []string{"github.com/anishathalye/porcupine/..."}},
	{path: "internal/nemesis", layer: layerSupport, support: true, stdOnly: true},
	// The end-to-end harness: real logd processes, built once per test
	// process, and the checks of what they hold.
	{path: "internal/e2e", layer: layerSupport, support: true, only: []string{"api/...", "client"}},
	{path: "internal/testcerts", layer: layerSupport, support: true, stdOnly: true},
	{path: "internal/pgtest", layer: layerSupport, support: true, stdOnly: true},
	{path: "internal/doctext", layer: layerSupport, support: true, stdOnly: true},
	{path: "internal/syncbuf", layer: layerSupport, support: true, stdOnly: true},

	{path: "server", layer: layerEdge, frontEnd: true},
	{path: "kafka", layer: layerEdge, frontEnd: true},
	// The client decodes the record batches a fetch answers with
	// (FetchRequest.batches, docs/guide.md "The Go client") with the one
	// codec the server and the log use, package batch: pure, below the
	// API, and of this module bringing only internal/varint (outside it
	// the compression libraries, which the module requires anyway). A
	// decoder of its own in client would be a second implementation of
	// the format to keep in step.
	{path: "client", layer: layerEdge, onlyDeps: []string{"api/...", "partition", "batch", "internal/varint"}},
	// The outbox and the inbox sit beside the client: database/sql, the
	// standard library and the client only (database drivers in tests and
	// cmd/logd-demo).
	{path: "outbox", layer: layerEdge, only: []string{"client", "internal/sqlident"}, siblings: []string{"client"}, onlyDeps: []string{"client", "api/...", "partition", "batch", "internal/varint", "internal/sqlident"}},
	{path: "inbox", layer: layerEdge, only: []string{"client", "internal/sqlident"}, siblings: []string{"client"}, onlyDeps: []string{"client", "api/...", "partition", "batch", "internal/varint", "internal/sqlident"}},

	{path: "api/logdv1", layer: layerAPI, only: []string{"api/..."}},
	{path: "api/logdv1/logdv1connect", layer: layerAPI, only: []string{"api/..."}, siblings: []string{"api/logdv1"}},

	// Raft's log, stable and snapshot stores of one Raft group
	// (raft-boltdb, raft-wal): replication opens them; they know nothing
	// of the node, so of this module they import only the log bridge.
	{path: "replication/raftstore", layer: layerRaft, only: []string{"internal/slogbridge"}},
	// replication hands its catch-up, backups and restore what they need
	// of a node (replication/catchup/doc.go); catchup's row names no
	// sibling, so it never imports replication.
	{path: "replication", layer: layerRaft, siblings: []string{"replication/raftstore", "replication/catchup", "replication/transport", "replication/cleaner", "replication/redrive", "replication/observe", "replication/placement"}},
	{path: "replication/catchup", layer: layerRaft},
	// The Raft port (a capped, authenticated raft.StreamLayer) and Raft's
	// address provider over peer routes: raft and peer, never the node
	// that drives it.
	{path: "replication/transport", layer: layerRaft, only: []string{"backend", "peer"}},
	// Where data groups live, as pure functions (replicas, preferred
	// leaders, a new topic's partitions): the standard library only.
	{path: "replication/placement", layer: layerRaft, stdOnly: true},
	// The leader's jobs: the retention and compaction scheduler and the
	// redrive jobs (docs/architecture.md, "Redrive jobs"). They see the
	// node through the interfaces they declare, which replication
	// implements, so they import no package of the Raft layer, and of
	// this module only the vocabulary, the state machine and what it
	// reads.
	// What a node sees of its Raft group's traffic: Raft's measurements
	// and the leader's commit index as heard (wrappers of raft's
	// transport and log store).
	{path: "replication/observe", layer: layerRaft, only: []string{"backend"}},
	{path: "replication/cleaner", layer: layerRaft, only: []string{"backend", "log", "replication/fsm", "retention"}},
	{path: "replication/redrive", layer: layerRaft, only: []string{"backend", "batch", "group", "replication/fsm"}},
	// The faults a fault build of cmd/logd injects into its own stores
	// (wrappers of log.FS and of Raft's stores); only cmd/logd's files
	// built with -tags faults import it.
	{path: "internal/faults", layer: layerRaft},

	{path: "replication/fsm", layer: layerMachine, pure: true},

	// The front ends' one door into the cluster (docs/architecture.md,
	// "The backend"): the state machine answers and fails in its values,
	// replication implements its interfaces, server and kafka call them.
	{path: "backend", layer: layerVocabulary, pure: true, only: []string{"auth", "batch", "group", "queue", "internal/backupfile"}},

	{path: "group", layer: layerState, pure: true},
	{path: "queue", layer: layerState, pure: true},
	{path: "dedup", layer: layerState, pure: true},
	{path: "retention", layer: layerState, pure: true},

	// log marks its durability steps with internal/failpoint, which is
	// empty in the default build (a fault build links gofail into it).
	{path: "log", layer: layerStorage, pure: true, stdOnly: true, stdAllow: []string{"internal/failpoint"}},
	{path: "batch", layer: layerStorage, pure: true},
	{path: "partition", layer: layerStorage, pure: true, stdOnly: true},

	{path: "auth", layer: layerLeaf, pure: true, stdOnly: true},
	{path: "auth/certid", layer: layerLeaf, stdOnly: true, stdAllow: []string{"auth"}, siblings: []string{"auth"}},
	// TLS material reloaded from files and the issuing behind logd cert
	// (docs/security.md): the network and randomness, so not pure, but
	// nothing outside the standard library besides the identities of
	// auth/certid, so every layer that speaks TLS may import it.
	{path: "internal/tlsconf", layer: layerLeaf, stdOnly: true, stdAllow: []string{"auth", "auth/certid"}, siblings: []string{"auth/certid"}},
	// Node-to-node identity (peer TLS), peer routes and the HTTP client
	// settings of calls between nodes: the front ends, replication and
	// cmd/logd share it, so it takes nothing with it, no raft above all.
	{path: "peer", layer: layerLeaf, stdOnly: true},
	// The per-principal byte-rate buckets both front ends draw from
	// (docs/security.md, "Quotas"): a clock injected, metrics registered.
	{path: "internal/quota", layer: layerLeaf, siblings: []string{"auth"}},
	// The answer memory budget both front ends draw from (answers being
	// built and sent): counters and timers, nothing else.
	{path: "internal/membudget", layer: layerLeaf, stdOnly: true},
	{path: "internal/varint", layer: layerLeaf, pure: true, stdOnly: true},
	// slogbridge routes hashicorp/raft's hclog and bbolt's logger into
	// the node's slog handler.
	{path: "internal/slogbridge", layer: layerLeaf},
	{path: "internal/failpoint", layer: layerLeaf, pure: true, stdOnly: true},
	// Which build is running (logd version, logctl version,
	// logd_build_info): the binary's embedded build information.
	{path: "internal/buildinfo", layer: layerLeaf, pure: true, stdOnly: true},
	// The backup file's format (docs/operations.md): replication/catchup
	// writes and restores it, logctl inspects it.
	{path: "internal/backupfile", layer: layerLeaf, pure: true, stdOnly: true},
	// The web console's embedded assets and their handler
	// (docs/console.md): the standard library only; the pages reach the
	// node through the API like any client.
	{path: "console", layer: layerLeaf, stdOnly: true},
	// The SQL identifiers the outbox and the inbox splice into SQL text.
	{path: "internal/sqlident", layer: layerLeaf, pure: true, stdOnly: true},
}

// pureForbidden are the packages the pure set must not depend on, even
// transitively: consensus, the network and randomness.
var pureForbidden = []string{
	"github.com/hashicorp/raft/...",
	"github.com/hashicorp/raft-boltdb/...",
	"github.com/hashicorp/raft-wal/...",
	"net",
	"net/http",
	"crypto/rand",
	"math/rand",
	"math/rand/v2",
}

// pureVetted are external packages the pure set may depend on although
// their own dependencies include randomness: the pure rule does not follow
// imports through them (a forbidden package reached by another path is
// still reported). Each is here for a reason read in its source:
//
//   - klauspost/compress (zstd and snappy, through s2), which package batch
//     decodes record batches with: its encoders can pad their output with
//     bytes from crypto/rand (an option batch never sets), and nothing on
//     its decoding path reads randomness, so decoding a stored batch gives
//     the same records on every replica (docs/architecture.md).
var pureVetted = []string{
	"github.com/klauspost/compress/...",
}

// frontEndForbidden are the packages a front end must not import
// directly: consensus, and (module-relative) the storage and the state
// machine.
var (
	frontEndForbidden       = []string{"github.com/hashicorp/raft/...", "github.com/hashicorp/raft-boltdb/...", "github.com/hashicorp/raft-wal/..."}
	frontEndForbiddenModule = []string{"log", "replication/..."}
)

// checker runs the rules of a table over an import graph, and checks the
// table against a document's. Each check returns its violations, one
// message each, sorted.
type checker struct {
	g    *graph
	rows map[string]row // by full import path
	doc  docTable
}

func newChecker(g *graph, rows []row, doc docTable) *checker {
	c := &checker{g: g, rows: map[string]row{}, doc: doc}
	for _, r := range rows {
		c.rows[g.module+"/"+r.path] = r
	}
	return c
}

// abs turns module-relative patterns into full ones.
func (c *checker) abs(patterns []string) []string {
	out := make([]string, len(patterns))
	for i, p := range patterns {
		out[i] = c.g.module + "/" + p
	}
	return out
}

// placedPkg is a package of the module with its row.
type placedPkg struct {
	p *pkg
	r row
}

// present returns the packages of the module that have a row, by import
// path.
func (c *checker) present() []placedPkg {
	var out []placedPkg
	for _, p := range c.g.own() {
		if r, ok := c.rows[p.ImportPath]; ok {
			out = append(out, placedPkg{p, r})
		}
	}
	return out
}

// placed: every package has a row, and every row that is not planned has a
// package.
func (c *checker) placed() []string {
	var out []string
	own := map[string]bool{}
	for _, p := range c.g.own() {
		own[p.ImportPath] = true
		if _, ok := c.rows[p.ImportPath]; !ok {
			out = append(out, fmt.Sprintf("no row: package %s is not in the architecture table; give it a layer in internal/archtest/arch_test.go and a row in docs/architecture.md's Packages table", c.g.rel(p.ImportPath)))
		}
	}
	for path, r := range c.rows {
		if !own[path] && !r.planned {
			out = append(out, fmt.Sprintf("stale row: %s has a row but is not a package of the module; remove the row or mark it planned", r.path))
		}
	}
	slices.Sort(out)
	return out
}

// layers: direct imports point down; same-layer imports only to named
// siblings; test support only from test support; and the only lists.
func (c *checker) layers() []string {
	var out []string
	for _, x := range c.present() {
		from, fr := x.p, x.r
		for _, imp := range from.Imports {
			if !c.g.inModule(imp) {
				continue
			}
			to, ok := c.rows[imp]
			if !ok {
				continue // reported by placed
			}
			switch {
			case to.layer > fr.layer:
				out = append(out, fmt.Sprintf("layer order: %s (%s) imports %s (%s), a layer above it; arrows point down: %s", fr.path, fr.layer, to.path, to.layer, arrows))
			case to.layer == fr.layer && !matchAny(imp, c.abs(fr.siblings)):
				out = append(out, fmt.Sprintf("layer order: %s imports its sibling %s (both %s); siblings do not import each other unless %s's row allows the edge", fr.path, to.path, fr.layer, fr.path))
			}
			if to.support && !fr.support {
				out = append(out, fmt.Sprintf("test support: %s imports %s, which only tests and test support may import", fr.path, to.path))
			}
			if fr.only != nil && !matchAny(imp, c.abs(fr.only)) {
				out = append(out, fmt.Sprintf("%s imports %s; of this module it may import only %s", fr.path, to.path, strings.Join(fr.only, ", ")))
			}
		}
	}
	slices.Sort(out)
	return out
}

// pure: the pure set depends on no consensus, network or randomness,
// except through the vetted packages (pureVetted).
func (c *checker) pure() []string {
	var out []string
	for _, x := range c.present() {
		if !x.r.pure {
			continue
		}
		prev := c.g.reach(x.p.ImportPath, pureVetted)
		for _, dep := range x.p.Deps {
			if _, ok := prev[dep]; ok && matchAny(dep, pureForbidden) {
				out = append(out, fmt.Sprintf("pure set: %s depends on %s (%s); the state machine's packages import no raft, network or randomness", x.r.path, dep, c.g.pathTo(prev, dep)))
			}
		}
	}
	slices.Sort(out)
	return out
}

// clock: no code of the pure set calls time.Now, time.Since or
// time.Until.
func (c *checker) clock() []string {
	return c.perFile("clock", func(r row) bool { return r.pure }, func(fset *token.FileSet, path, file string) ([]string, error) {
		calls, err := clockCalls(fset, file, nil)
		var out []string
		for _, call := range calls {
			out = append(out, fmt.Sprintf("pure set: %s calls %s at %s; take the time from the command or an injected clock (naming time.Now as a default is fine)", path, call.call, call.pos))
		}
		return out, err
	})
}

// perFile runs check over the non-test source files of every placed
// package whose row keep selects, sorted; a file it cannot parse is
// reported under the rule's name.
func (c *checker) perFile(rule string, keep func(row) bool, check func(fset *token.FileSet, path, file string) ([]string, error)) []string {
	var out []string
	fset := token.NewFileSet()
	for _, x := range c.present() {
		if !keep(x.r) {
			continue
		}
		for _, file := range sourceFiles(x.p) {
			found, err := check(fset, x.r.path, file)
			if err != nil {
				out = append(out, fmt.Sprintf("%s: %s: cannot parse %s: %v", rule, x.r.path, file, err))
				continue
			}
			out = append(out, found...)
		}
	}
	slices.Sort(out)
	return out
}

// frontEnds: front ends depend, directly or not, on neither raft nor the
// storage nor any package of replication; they see package backend.
func (c *checker) frontEnds() []string {
	var out []string
	forbidden := append(slices.Clone(frontEndForbidden), c.abs(frontEndForbiddenModule)...)
	for _, x := range c.present() {
		if !x.r.frontEnd {
			continue
		}
		prev := c.g.reach(x.p.ImportPath, nil)
		for _, dep := range x.p.Deps {
			if _, ok := prev[dep]; ok && matchAny(dep, forbidden) {
				out = append(out, fmt.Sprintf("front end: %s depends on %s (%s); front ends see package backend only (no raft, no log, no replication)", x.r.path, c.g.short(dep), c.g.pathTo(prev, dep)))
			}
		}
	}
	slices.Sort(out)
	return out
}

// onlyDeps: packages with a dependency list depend, of this module, on
// nothing else.
func (c *checker) onlyDeps() []string {
	var out []string
	for _, x := range c.present() {
		if x.r.onlyDeps == nil {
			continue
		}
		allowed := c.abs(x.r.onlyDeps)
		for _, dep := range x.p.Deps {
			if c.g.inModule(dep) && !matchAny(dep, allowed) {
				out = append(out, fmt.Sprintf("%s depends on %s (%s); of this module it may depend only on %s", x.r.path, c.g.rel(dep), c.g.chain(x.p.ImportPath, dep), strings.Join(x.r.onlyDeps, ", ")))
			}
		}
	}
	slices.Sort(out)
	return out
}

// stdOnly: packages marked so depend on the standard library alone, and
// on the external packages and module packages (stdAllow) their row lists.
func (c *checker) stdOnly() []string {
	var out []string
	for _, x := range c.present() {
		if !x.r.stdOnly {
			continue
		}
		allowed := c.abs(x.r.stdAllow)
		for _, dep := range x.p.Deps {
			if matchAny(dep, allowed) {
				continue
			}
			if d := c.g.pkgs[dep]; (d == nil || !d.Standard) && !matchAny(dep, x.r.external) {
				out = append(out, fmt.Sprintf("standard library only: %s depends on %s (%s)", x.r.path, c.g.short(dep), c.g.chain(x.p.ImportPath, dep)))
			}
		}
	}
	slices.Sort(out)
	return out
}

// rule is one check by name.
type rule struct {
	name  string
	check func() []string
}

// rules are the checks, in the order they are reported.
func (c *checker) rules() []rule {
	return []rule{
		{"placed", c.placed},
		{"documented", c.documented},
		{"layers", c.layers},
		{"pure", c.pure},
		{"clock", c.clock},
		{"front-ends", c.frontEnds},
		{"aliases", c.aliases},
		{"only-deps", c.onlyDeps},
		{"std-only", c.stdOnly},
	}
}

// TestArchitecture checks the module's import graph against the table,
// and the table against the Packages table of docs/architecture.md. Each
// rule is a subtest that lists every violation it finds.
func TestArchitecture(t *testing.T) {
	g, err := loadGraph(module)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.own()) == 0 {
		t.Fatalf("go list found no package of %s", module)
	}
	doc, err := readDocTable(moduleDoc(archDoc), archDoc)
	if err != nil {
		t.Fatal(err)
	}
	c := newChecker(g, table, doc)
	for _, r := range c.rules() {
		t.Run(r.name, func(t *testing.T) {
			for _, v := range r.check() {
				t.Error(v)
			}
		})
	}
}

// aliases: no package of the module re-exports another package's names:
// no exported type alias of another package's type, and no exported
// variable or constant that is another package's name (type X = p.Y, var
// ErrX = p.ErrX). Such names made one vocabulary look like two and let a
// front end reach what it should not see under a harmless name.
func (c *checker) aliases() []string {
	return c.perFile("aliases", func(row) bool { return true }, func(fset *token.FileSet, path, file string) ([]string, error) {
		found, err := reexports(fset, file)
		var out []string
		for _, f := range found {
			out = append(out, fmt.Sprintf("aliases: %s re-exports %s at %s; use the name where it is declared", path, f.name, f.pos))
		}
		return out, err
	})
}

// reexport is one exported name of a file that is another package's.
type reexport struct{ name, pos string }

// reexports lists the exported declarations of file that name another
// package's identifier: a type alias of a qualified type, or a variable or
// constant whose value is a qualified identifier alone.
func reexports(fset *token.FileSet, file string) ([]reexport, error) {
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	// Only names of this module's packages count: a constant set to
	// time.Second is a value, not a second name for one of ours.
	own := map[string]bool{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if path != module && !strings.HasPrefix(path, module+"/") {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		own[name] = true
	}
	var out []reexport
	qualified := func(e ast.Expr) (string, bool) {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		id, ok := sel.X.(*ast.Ident)
		return id.Name + "." + sel.Sel.Name, ok && own[id.Name]
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			switch sp := spec.(type) {
			case *ast.TypeSpec:
				if q, ok := qualified(sp.Type); ok && sp.Assign.IsValid() && sp.Name.IsExported() {
					out = append(out, reexport{sp.Name.Name + " = " + q, fset.Position(sp.Pos()).String()})
				}
			case *ast.ValueSpec:
				for i, n := range sp.Names {
					if i >= len(sp.Values) || !n.IsExported() {
						continue
					}
					if q, ok := qualified(sp.Values[i]); ok {
						out = append(out, reexport{n.Name + " = " + q, fset.Position(n.Pos()).String()})
					}
				}
			}
		}
	}
	return out, nil
}
