package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// pkg is one package as go list -deps -json describes it. Imports and Deps
// are those of the non-test files: tests' imports are not part of the
// graph.
type pkg struct {
	ImportPath     string
	Dir            string
	Standard       bool
	DepOnly        bool
	Imports        []string
	Deps           []string
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string
	Module         *struct{ Path string }
}

// graph is the import graph of a module and everything it depends on.
type graph struct {
	module string          // the module path
	pkgs   map[string]*pkg // by import path, the standard library included
}

// listFields are the fields loadGraph asks go list for.
const listFields = "ImportPath,Dir,Standard,DepOnly,Imports,Deps,GoFiles,CgoFiles,IgnoredGoFiles,Module"

// loadGraph runs go list once over every package of module and its
// dependencies.
func loadGraph(module string) (*graph, error) {
	cmd := exec.Command("go", "list", "-deps", "-json="+listFields, module+"/...")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list -deps %s/...: %w\n%s", module, err, stderr.String())
	}
	g := &graph{module: module, pkgs: map[string]*pkg{}}
	dec := json.NewDecoder(&stdout)
	for {
		p := new(pkg)
		err := dec.Decode(p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		g.pkgs[p.ImportPath] = p
	}
	return g, nil
}

// own returns the module's own packages (not only dependencies), sorted.
func (g *graph) own() []*pkg {
	var out []*pkg
	for _, p := range g.pkgs {
		if !p.DepOnly && p.Module != nil && p.Module.Path == g.module {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *pkg) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	return out
}

// inModule reports whether path is a package of the module.
func (g *graph) inModule(path string) bool {
	return path == g.module || strings.HasPrefix(path, g.module+"/")
}

// rel returns path relative to the module ("log" for <module>/log).
func (g *graph) rel(path string) string {
	if path == g.module {
		return "."
	}
	return strings.TrimPrefix(path, g.module+"/")
}

// chain returns a shortest import chain from one package to another
// (from -> ... -> to, module paths shortened), for messages.
func (g *graph) chain(from, to string) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for p := to; p != ""; p = prev[p] {
				path = append(path, g.short(p))
			}
			slices.Reverse(path)
			return strings.Join(path, " -> ")
		}
		if p := g.pkgs[cur]; p != nil {
			for _, next := range p.Imports {
				if _, seen := prev[next]; !seen {
					prev[next] = cur
					queue = append(queue, next)
				}
			}
		}
	}
	return g.short(from) + " -> ... -> " + g.short(to)
}

// reach returns the packages reachable from one by imports without
// passing through a package that matches one of through (such a package is
// reached, its imports are not followed), each with the package that
// imports it on a shortest such path (from's is "").
func (g *graph) reach(from string, through []string) map[string]string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		p := g.pkgs[cur]
		if p == nil || cur != from && matchAny(cur, through) {
			continue
		}
		for _, next := range p.Imports {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return prev
}

// pathTo returns the chain from reach's starting package to to (module
// paths shortened), for messages.
func (g *graph) pathTo(prev map[string]string, to string) string {
	var path []string
	for p := to; p != ""; p = prev[p] {
		path = append(path, g.short(p))
	}
	slices.Reverse(path)
	return strings.Join(path, " -> ")
}

// short is rel for the module's packages and the path itself otherwise.
func (g *graph) short(path string) string {
	if g.inModule(path) {
		return g.rel(path)
	}
	return path
}

// match reports whether path matches pattern: an exact import path, or
// "p/..." for p and every package below it.
func match(path, pattern string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// matchAny reports whether path matches one of patterns.
func matchAny(path string, patterns []string) bool {
	for _, p := range patterns {
		if match(path, p) {
			return true
		}
	}
	return false
}

// clockCall is a call that reads the wall clock, found in a source file.
type clockCall struct {
	pos  token.Position
	call string // "time.Now()"
}

// clockFuncs are the functions of package time that read the clock.
var clockFuncs = map[string]bool{"Now": true, "Since": true, "Until": true}

// clockCalls returns every call of time.Now, time.Since or time.Until in
// src, whatever name the file imports package time under. Naming time.Now
// as a value (a default for an injected clock) is not a call and is not
// reported.
func clockCalls(fset *token.FileSet, filename string, src any) ([]clockCall, error) {
	f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	name, dot := "", false
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil || path != "time" {
			continue
		}
		switch {
		case imp.Name == nil:
			name = "time"
		case imp.Name.Name == ".":
			dot = true
		case imp.Name.Name != "_":
			name = imp.Name.Name
		}
	}
	if name == "" && !dot {
		return nil, nil
	}
	var out []clockCall
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		switch fun := call.Fun.(type) {
		case *ast.SelectorExpr:
			if x, ok := fun.X.(*ast.Ident); ok && name != "" && x.Name == name && clockFuncs[fun.Sel.Name] {
				out = append(out, clockCall{fset.Position(call.Pos()), "time." + fun.Sel.Name + "()"})
			}
		case *ast.Ident:
			if dot && clockFuncs[fun.Name] {
				out = append(out, clockCall{fset.Position(call.Pos()), "time." + fun.Name + "()"})
			}
		}
		return true
	})
	return out, nil
}

// sourceFiles returns the non-test Go files of p, those excluded by build
// constraints included (another platform's file must be pure as well).
func sourceFiles(p *pkg) []string {
	var out []string
	for _, list := range [][]string{p.GoFiles, p.CgoFiles, p.IgnoredGoFiles} {
		for _, f := range list {
			if strings.HasSuffix(f, ".go") && !strings.HasSuffix(f, "_test.go") {
				out = append(out, filepath.Join(p.Dir, f))
			}
		}
	}
	slices.Sort(out)
	return out
}
