package archtest

import (
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// synthetic builds an import graph from direct imports alone (module
// packages relative to module m, everything else standard library), with
// Deps computed as go list would.
func synthetic(imports map[string][]string) *graph {
	const m = "example.com/m"
	g := &graph{module: m, pkgs: map[string]*pkg{}}
	full := func(p string) string {
		if strings.Contains(p, ".") { // a third-party path
			return p
		}
		if strings.HasPrefix(p, "std:") {
			return strings.TrimPrefix(p, "std:")
		}
		return m + "/" + p
	}
	for from, tos := range imports {
		p := &pkg{ImportPath: full(from)}
		switch {
		case strings.HasPrefix(from, "std:"):
			p.Standard, p.DepOnly = true, true
		case strings.Contains(from, "."):
			p.DepOnly = true
		default:
			p.Module = &struct{ Path string }{m}
		}
		for _, to := range tos {
			p.Imports = append(p.Imports, full(to))
		}
		g.pkgs[p.ImportPath] = p
	}
	for _, p := range g.pkgs {
		seen := map[string]bool{}
		var walk func(string)
		walk = func(path string) {
			for _, next := range g.pkgs[path].Imports {
				if !seen[next] {
					seen[next] = true
					walk(next)
				}
			}
		}
		walk(p.ImportPath)
		for d := range seen {
			p.Deps = append(p.Deps, d)
		}
		slices.Sort(p.Deps)
	}
	return g
}

// cleanImports is a small module that keeps every rule; each case of
// TestCheckerFindsViolations breaks one.
func cleanImports() map[string][]string {
	return map[string][]string{
		"cmd/d":            {"server", "replication", "api/v1"},
		"cmd/ctl":          {"client", "api/v1"},
		"logdtest":         {"server", "replication", "log/logtest"},
		"log/logtest":      {"log"},
		"server":           {"api/v1", "api/v1/v1connect", "std:net/http"},
		"client":           {"api/v1", "partition", "std:net/http"},
		"api/v1":           {},
		"api/v1/v1connect": {"api/v1", "std:net/http"},
		"replication":      {"replication/fsm", "github.com/hashicorp/raft", "std:crypto/rand"},
		"replication/fsm":  {"group", "dedup", "log", "batch", "std:time"},
		"group":            {"std:time"},
		"dedup":            {"github.com/zeebo/xxh3", "internal/varint"},
		"log":              {"std:os"},
		"batch":            {"internal/varint", "github.com/klauspost/compress/zstd"},
		"partition":        {},
		"internal/varint":  {},
		"internal/hist":    {"github.com/zeebo/xxh3", "std:time"},

		"github.com/hashicorp/raft": {"std:net", "std:math/rand"},
		"github.com/zeebo/xxh3":     {},
		// A vetted dependency of the pure set (pureVetted) whose own
		// imports include randomness.
		"github.com/klauspost/compress/zstd": {"std:crypto/rand"},
		"std:net/http":                       {"std:net", "std:crypto/rand"},
		"std:net":                            {},
		"std:crypto/rand":                    {},
		"std:math/rand":                      {},
		"std:math/rand/v2":                   {},
		"std:time":                           {},
		"std:os":                             {"std:time"},
	}
}

// syntheticTable places the packages of cleanImports as the real table
// places theirs.
var syntheticTable = []row{
	{path: "cmd/d", layer: layerTop},
	{path: "cmd/ctl", layer: layerTop, only: []string{"client", "api/..."}},
	{path: "logdtest", layer: layerSupport, support: true, siblings: []string{"log/logtest"}},
	{path: "log/logtest", layer: layerSupport, support: true},
	{path: "internal/hist", layer: layerSupport, support: true, stdOnly: true, external: []string{"github.com/zeebo/xxh3/..."}},
	{path: "server", layer: layerEdge, frontEnd: true},
	{path: "kafka", layer: layerEdge, frontEnd: true, planned: true},
	{path: "client", layer: layerEdge, onlyDeps: []string{"api/...", "partition"}},
	{path: "api/v1", layer: layerAPI, only: []string{"api/..."}},
	{path: "api/v1/v1connect", layer: layerAPI, only: []string{"api/..."}, siblings: []string{"api/v1"}},
	{path: "replication", layer: layerRaft},
	{path: "replication/fsm", layer: layerMachine, pure: true},
	{path: "group", layer: layerState, pure: true},
	{path: "dedup", layer: layerState, pure: true},
	{path: "retention", layer: layerState, pure: true, planned: true},
	{path: "log", layer: layerStorage, pure: true, stdOnly: true},
	{path: "batch", layer: layerStorage, pure: true},
	{path: "partition", layer: layerStorage, pure: true, stdOnly: true},
	{path: "internal/varint", layer: layerLeaf, pure: true, stdOnly: true},
}

// syntheticDoc is a document's Packages table that lists every row of
// syntheticTable.
func syntheticDoc() docTable {
	d := docTable{name: "docs/synthetic.md"}
	for _, r := range syntheticTable {
		d.paths = append(d.paths, r.path)
	}
	return d
}

// violations runs every rule and returns all messages.
func violations(c *checker) []string {
	var out []string
	for _, r := range c.rules() {
		out = append(out, r.check()...)
	}
	return out
}

// TestCheckerFindsViolations proves the checker: the clean synthetic
// module passes, and each case adds one forbidden edge (or package, or
// call) that must be reported under the rule it breaks.
func TestCheckerFindsViolations(t *testing.T) {
	if v := violations(newChecker(synthetic(cleanImports()), syntheticTable, syntheticDoc())); len(v) > 0 {
		t.Fatalf("the clean module has violations:\n%s", strings.Join(v, "\n"))
	}
	for _, tc := range []struct {
		name string
		// mutate breaks the clean module's imports.
		mutate func(imports map[string][]string)
		// clock, if set, is a source file of replication/fsm.
		clock string
		// doc, if set, changes the document's rows.
		doc  func(paths []string) []string
		want []string // substrings of violations that must be reported
	}{
		{
			name: "storage imports the state machine (upward)",
			mutate: func(im map[string][]string) {
				im["log"] = append(im["log"], "replication/fsm")
			},
			want: []string{"layer order: log (storage: log, batch, partition) imports replication/fsm (state machine: replication/fsm), a layer above it"},
		},
		{
			name: "state machine imports raft (upward, and impure)",
			mutate: func(im map[string][]string) {
				im["replication/fsm"] = append(im["replication/fsm"], "replication")
			},
			want: []string{
				"layer order: replication/fsm (state machine: replication/fsm) imports replication (raft: replication)",
				"pure set: replication/fsm depends on github.com/hashicorp/raft (replication/fsm -> replication -> github.com/hashicorp/raft)",
			},
		},
		{
			name: "sibling import",
			mutate: func(im map[string][]string) {
				im["group"] = append(im["group"], "dedup")
			},
			want: []string{"layer order: group imports its sibling dedup"},
		},
		{
			name: "production code imports test support",
			mutate: func(im map[string][]string) {
				im["cmd/d"] = append(im["cmd/d"], "log/logtest")
			},
			want: []string{"test support: cmd/d imports log/logtest"},
		},
		{
			name: "pure package reaches the network through the standard library",
			mutate: func(im map[string][]string) {
				im["group"] = append(im["group"], "std:net/http")
			},
			want: []string{
				"pure set: group depends on net/http (group -> net/http)",
				"pure set: group depends on net (group -> net/http -> net)",
				"pure set: group depends on crypto/rand (group -> net/http -> crypto/rand)",
			},
		},
		{
			name: "pure package uses math/rand/v2",
			mutate: func(im map[string][]string) {
				im["dedup"] = append(im["dedup"], "std:math/rand/v2")
			},
			want: []string{"pure set: dedup depends on math/rand/v2"},
		},
		{
			name: "pure package reaches randomness beside a vetted dependency",
			mutate: func(im map[string][]string) {
				im["batch"] = append(im["batch"], "std:crypto/rand")
			},
			want: []string{"pure set: batch depends on crypto/rand (batch -> crypto/rand)"},
		},
		{
			name: "pure package reaches randomness through an unvetted dependency",
			mutate: func(im map[string][]string) {
				im["dedup"] = append(im["dedup"], "github.com/example/rng")
				im["github.com/example/rng"] = []string{"std:math/rand"}
			},
			want: []string{"pure set: dedup depends on math/rand (dedup -> github.com/example/rng -> math/rand)"},
		},
		{
			name:  "state machine calls time.Now",
			clock: "package fsm\n\nimport \"time\"\n\nvar now = time.Now // a default: allowed\n\nfunc stamp() int64 { return time.Now().UnixNano() }\n",
			want:  []string{"pure set: replication/fsm calls time.Now() at ", filepath.Join("fsm", "clock.go") + ":7:29; take the time"},
		},
		{
			name:  "state machine calls time.Since under another name",
			clock: "package fsm\n\nimport clk \"time\"\n\nfunc age(t clk.Time) clk.Duration { return clk.Since(t) }\n",
			want:  []string{"pure set: replication/fsm calls time.Since() at"},
		},
		{
			name: "front end imports the storage",
			mutate: func(im map[string][]string) {
				im["server"] = append(im["server"], "log")
			},
			want: []string{"front end: server depends on log"},
		},
		{
			name: "front end imports the state machine and raft",
			mutate: func(im map[string][]string) {
				im["server"] = append(im["server"], "replication/fsm", "github.com/hashicorp/raft")
			},
			want: []string{
				"front end: server depends on replication/fsm",
				"front end: server depends on github.com/hashicorp/raft",
			},
		},
		{
			name: "client pulls in more of the module through partition",
			mutate: func(im map[string][]string) {
				im["partition"] = append(im["partition"], "internal/varint")
			},
			want: []string{
				"client depends on internal/varint (client -> partition -> internal/varint); of this module it may depend only on api/..., partition",
				"standard library only: partition depends on internal/varint",
			},
		},
		{
			name: "logctl imports the server",
			mutate: func(im map[string][]string) {
				im["cmd/ctl"] = append(im["cmd/ctl"], "server")
			},
			want: []string{"cmd/ctl imports server; of this module it may import only client, api/..."},
		},
		{
			name: "api imports the module",
			mutate: func(im map[string][]string) {
				im["api/v1"] = append(im["api/v1"], "partition")
			},
			want: []string{"api/v1 imports partition; of this module it may import only api/..."},
		},
		{
			name: "storage imports a third-party package",
			mutate: func(im map[string][]string) {
				im["log"] = append(im["log"], "github.com/zeebo/xxh3")
			},
			want: []string{"standard library only: log depends on github.com/zeebo/xxh3 (log -> github.com/zeebo/xxh3)"},
		},
		{
			name: "std-only package with an allowed external dependency imports another",
			mutate: func(im map[string][]string) {
				im["internal/hist"] = append(im["internal/hist"], "github.com/hashicorp/raft")
			},
			want: []string{"standard library only: internal/hist depends on github.com/hashicorp/raft (internal/hist -> github.com/hashicorp/raft)"},
		},
		{
			name: "a package without a row",
			mutate: func(im map[string][]string) {
				im["newthing"] = []string{"log"}
			},
			want: []string{"no row: package newthing is not in the architecture table"},
		},
		{
			name: "a row without a package",
			mutate: func(im map[string][]string) {
				delete(im, "batch")
				for k, tos := range im {
					im[k] = slices.DeleteFunc(tos, func(s string) bool { return s == "batch" })
				}
			},
			want: []string{"stale row: batch has a row but is not a package of the module"},
		},
		{
			name: "a package without a row in the document",
			doc: func(paths []string) []string {
				return slices.DeleteFunc(paths, func(p string) bool { return p == "dedup" })
			},
			want: []string{"no row in docs/synthetic.md: package dedup is not in the document's Packages table"},
		},
		{
			name: "a new package in neither table",
			mutate: func(im map[string][]string) {
				im["newthing"] = []string{"log"}
			},
			want: []string{
				"no row: package newthing is not in the architecture table",
				"no row in docs/synthetic.md: package newthing is not in the document's Packages table",
			},
		},
		{
			name: "a planned package the document lacks",
			doc: func(paths []string) []string {
				return slices.DeleteFunc(paths, func(p string) bool { return p == "kafka" })
			},
			want: []string{"the table of internal/archtest/arch_test.go has a row for kafka, the Packages table of docs/synthetic.md has none"},
		},
		{
			name: "a document row the test's table lacks",
			doc: func(paths []string) []string {
				return append(paths, "oldthing", "group")
			},
			want: []string{
				"the Packages table of docs/synthetic.md has a row for oldthing, the table of internal/archtest/arch_test.go has none",
				"docs/synthetic.md: package group has more than one row in the Packages table",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := cleanImports()
			if tc.mutate != nil {
				tc.mutate(im)
			}
			g := synthetic(im)
			if tc.clock != "" {
				dir := filepath.Join(t.TempDir(), "fsm")
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "clock.go"), []byte(tc.clock), 0o644); err != nil {
					t.Fatal(err)
				}
				p := g.pkgs[g.module+"/replication/fsm"]
				p.Dir, p.GoFiles = dir, []string{"clock.go"}
			}
			doc := syntheticDoc()
			if tc.doc != nil {
				doc.paths = tc.doc(doc.paths)
			}
			got := violations(newChecker(g, syntheticTable, doc))
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, w) }) {
					t.Errorf("not reported: %q\ngot:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// TestClockCalls: calls that read the clock are found under any import
// name; naming a clock function as a value, or a method named Now, is not
// a call of package time.
func TestClockCalls(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string // "line:call"
	}{
		{"no time import", "package p\n\nfunc f() { Now() }\nfunc Now() {}\n", nil},
		{"value only", "package p\n\nimport \"time\"\n\nvar Default = time.Now\n", nil},
		{"call", "package p\n\nimport \"time\"\n\nfunc f() { _ = time.Now() }\n", []string{"5:time.Now()"}},
		{"since and until", "package p\n\nimport \"time\"\n\nfunc f(t time.Time) {\n\t_ = time.Since(t)\n\t_ = time.Until(t)\n}\n", []string{"6:time.Since()", "7:time.Until()"}},
		{"renamed", "package p\n\nimport clock \"time\"\n\nfunc f() { _ = clock.Now() }\n", []string{"5:time.Now()"}},
		{"dot import", "package p\n\nimport . \"time\"\n\nfunc f() { _ = Now() }\n", []string{"5:time.Now()"}},
		{"method named Now", "package p\n\nimport \"time\"\n\ntype c struct{ Now func() time.Time }\n\nfunc f(x c) { _ = x.Now() }\n", nil},
		{"other package's Now", "package p\n\nimport (\n\t\"time\"\n\ttime2 \"example.com/time\"\n)\n\nvar _ time.Duration\n\nfunc f() { _ = time2.Now() }\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, err := clockCalls(token.NewFileSet(), "x.go", tc.src)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range calls {
				got = append(got, strconv.Itoa(c.pos.Line)+":"+c.call)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReexports: the aliases rule finds a module package's names declared
// again under another package's name, and nothing else.
func TestReexports(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"type alias", "package p\n\nimport \"github.com/logd-dev/logd/replication/fsm\"\n\ntype Topic = fsm.Topic\n", []string{"Topic = fsm.Topic"}},
		{"error variable", "package p\n\nimport \"github.com/logd-dev/logd/log\"\n\nvar ErrCorrupt = log.ErrCorrupt\n", []string{"ErrCorrupt = log.ErrCorrupt"}},
		{"renamed import", "package p\n\nimport q \"github.com/logd-dev/logd/queue\"\n\nconst Max = q.MaxAttempts\n", []string{"Max = q.MaxAttempts"}},
		{"grouped", "package p\n\nimport \"github.com/logd-dev/logd/group\"\n\nvar (\n\tA = 1\n\tB = group.NoFence\n)\n", []string{"B = group.NoFence"}},
		{"standard library value", "package p\n\nimport \"time\"\n\nconst Default = time.Second\n", nil},
		{"unexported", "package p\n\nimport \"github.com/logd-dev/logd/log\"\n\nvar errCorrupt = log.ErrCorrupt\n", nil},
		{"defined type", "package p\n\nimport \"github.com/logd-dev/logd/replication/fsm\"\n\ntype Topic fsm.Topic\n", nil},
		{"expression", "package p\n\nimport \"github.com/logd-dev/logd/log\"\n\nvar ErrX = fmt.Errorf(\"x: %w\", log.ErrCorrupt)\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "p.go")
			if err := os.WriteFile(file, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			found, err := reexports(token.NewFileSet(), file)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range found {
				got = append(got, f.name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestParseDocTable: the rows of the first table of the Packages section,
// trailing slashes dropped; a document without the section or without
// rows is an error that says what is missing.
func TestParseDocTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want []string
		err  string
	}{
		{
			name: "rows",
			text: "# A\n\n## Packages\n\nIntro.\n\n| Package | Holds |\n|---|---|\n| `server/` | the handlers |\n| `internal/varint` | sizes \\| varints |\n\n| Other | table |\n|---|---|\n| `not/this` | x |\n\n## Rules\n\n| `nor/this` | y |\n",
			want: []string{"server", "internal/varint"},
		},
		{
			name: "no section",
			text: "# A\n\n## Layers\n\n| Package | Holds |\n|---|---|\n| `log/` | x |\n",
			err:  `no "## Packages" section`,
		},
		{
			name: "no rows",
			text: "## Packages\n\nNone yet.\n\n## Rules\n",
			err:  "no table rows",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseDocTable(tc.text)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("rows %q, want %q", got, tc.want)
			}
		})
	}
}
