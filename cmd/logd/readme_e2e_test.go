package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/e2e"
)

// The tested examples of README.md and docs/guide.md (readmeDocs): a
// ```sh block right after the line readmeMarker. Such a block is a transcript when a line starts with "$ ":
// each such line (with its continuation lines, ending in \) is a command
// and the lines up to the next command its expected output, stdout and
// stderr as a terminal shows them. Otherwise every line is a command and
// its output is not compared. Comparison (readmeOutputMatches) collapses
// runs of spaces, drops a trailing "  # comment", and takes "..." for any
// text within a line, or any lines when alone on its line, and the
// placeholders of readmePlaceholders. A command must exit 0 unless its
// comment says "exit N". A document's commands run in order, in one bash,
// in a fresh directory, against a fresh node of its own (127.0.0.1:7070 in
// a command is its address, and LOGCTL_SERVER names it), with logd and
// logctl on PATH.
const readmeMarker = "<!-- tested: cmd/logd/readme_e2e_test.go -->"

// readmeDocs are the documents with tested examples, relative to the
// module's root, each with the fewest tested commands it must have: a
// document that lost its examples (a section moved elsewhere) fails
// instead of passing with nothing run.
var readmeDocs = []struct {
	path string
	min  int
}{
	{path: "README.md", min: 3},      // the quick start
	{path: "docs/guide.md", min: 20}, // the walk-throughs
}

// readmePlaceholders are what the documents' outputs may show for values
// that change from run to run.
var readmePlaceholders = map[string]string{
	"<time>":     `\d{4}-\d\d-\d\dT[0-9:.]+Z`,  // an RFC 3339 time
	"<age>":      `-|[0-9.]+(ns|µs|ms|s|m|h)+`, // a duration, or - for none
	"<token>":    `\d+\.\d+\.\d+\.[0-9a-f]+`,   // a delivery token
	"<n>":        `\d+`,                        // a number
	"<rate>":     `\d+\.\d`,                    // a rate per second, which depends on when the calls ran
	"<version>":  `\S+`,                        // a version, commit or date
	"<redrive>":  `logd-redrive\.[\w.-]+`,      // a redrive position's group
	"<datetime>": `\S+`,                        // any timestamp form
}

// readmeCommand is one tested command of a document and what it should
// print.
type readmeCommand struct {
	line     int // in its document
	cmd      string
	want     []string // nil: not compared
	exitCode int
}

// exitComment finds "exit N" in a command's trailing comment.
var exitComment = regexp.MustCompile(`#.*\bexit (\d+)`)

// readmeCommands extracts the tested commands of the document at path,
// named name in messages.
func readmeCommands(t *testing.T, path, name string) []readmeCommand {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []readmeCommand
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != readmeMarker {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			t.Fatalf("%s:%d: the marker is not followed by a ```sh block", name, i+1)
		}
		start := i + 2
		end := start
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		block := lines[start:end]
		transcript := false
		for _, l := range block {
			if strings.HasPrefix(l, "$ ") {
				transcript = true
			}
		}
		for j := 0; j < len(block); j++ {
			l := block[j]
			if transcript && !strings.HasPrefix(l, "$ ") {
				t.Fatalf("%s:%d: output before the block's first command", name, start+j+1)
			}
			if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
				continue
			}
			c := readmeCommand{line: start + j + 1, cmd: strings.TrimPrefix(l, "$ ")}
			for strings.HasSuffix(l, `\`) && j+1 < len(block) {
				j++
				l = block[j]
				c.cmd += "\n" + l
			}
			if m := exitComment.FindStringSubmatch(c.cmd); m != nil {
				c.exitCode, _ = strconv.Atoi(m[1])
			}
			if transcript {
				c.want = []string{}
				for j+1 < len(block) && !strings.HasPrefix(block[j+1], "$ ") {
					j++
					c.want = append(c.want, block[j])
				}
			}
			out = append(out, c)
		}
		i = end
	}
	return out
}

// trailingComment is a comment after output, set off by two spaces.
var trailingComment = regexp.MustCompile(`\s{2,}#.*$`)

// readmeLineRegexp turns one line of a document's expected output into a
// regular expression over an output line with runs of spaces collapsed.
func readmeLineRegexp(l string) *regexp.Regexp {
	l = strings.Join(strings.Fields(trailingComment.ReplaceAllString(l, "")), " ")
	var b strings.Builder
	b.WriteString(`^`)
	for len(l) > 0 {
		switch {
		case strings.HasPrefix(l, "..."):
			b.WriteString(`.*`)
			l = l[3:]
			continue
		case l[0] == ' ':
			b.WriteString(` +`)
			l = l[1:]
			continue
		case l[0] == '<':
			matched := false
			for ph, re := range readmePlaceholders {
				if strings.HasPrefix(l, ph) {
					b.WriteString(`(?:` + re + `)`)
					l = l[len(ph):]
					matched = true
					break
				}
			}
			if matched {
				continue
			}
		}
		r := []rune(l)[0]
		b.WriteString(regexp.QuoteMeta(string(r)))
		l = l[len(string(r)):]
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// readmeOutputMatches says whether output (normalized) is what the
// document's lines want: each line matches its line (readmeLineRegexp), and
// a line "..." alone stands for any number of lines.
func readmeOutputMatches(want []string, output string) bool {
	for len(want) > 0 && strings.TrimSpace(want[len(want)-1]) == "" {
		want = want[:len(want)-1]
	}
	got := strings.Split(output, "\n")
	if output == "" {
		got = nil
	}
	var match func(wi, gi int) bool
	match = func(wi, gi int) bool {
		if wi == len(want) {
			return gi == len(got)
		}
		if strings.TrimSpace(trailingComment.ReplaceAllString(want[wi], "")) == "..." {
			for g := gi; g <= len(got); g++ {
				if match(wi+1, g) {
					return true
				}
			}
			return false
		}
		return gi < len(got) && readmeLineRegexp(want[wi]).MatchString(got[gi]) && match(wi+1, gi+1)
	}
	return match(0, 0)
}

// normalizeOutput collapses runs of spaces and drops blank lines at the
// end, as readmeOutputMatches does with the expected lines.
func normalizeOutput(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n "), "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// readmeShell is one bash that runs a document's commands in turn, so
// that variables set by one command reach the next.
type readmeShell struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

const readmeSentinel = "__readme_exit__"

func startReadmeShell(t *testing.T, dir string, env []string) *readmeShell {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir = dir
	cmd.Env = env
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); pw.Close() }()
	sh := &readmeShell{cmd: cmd, in: in, out: bufio.NewReader(pr)}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill() })
	return sh
}

// run runs one command and returns what it printed and its exit code;
// it fails when the command takes longer than timeout.
func (sh *readmeShell) run(command string, timeout time.Duration) (string, int, error) {
	// Stdin is /dev/null: a command must not read the shell's script.
	if _, err := fmt.Fprintf(sh.in, "{\n%s\n} </dev/null 2>&1; printf '\\n%s %%d\\n' $?\n", command, readmeSentinel); err != nil {
		return "", 0, err
	}
	type result struct {
		out  string
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := sh.out.ReadString('\n')
			if err != nil {
				done <- result{b.String(), 0, fmt.Errorf("shell ended: %w", err)}
				return
			}
			if rest, ok := strings.CutPrefix(line, readmeSentinel+" "); ok {
				code, _ := strconv.Atoi(strings.TrimSpace(rest))
				done <- result{strings.TrimSuffix(b.String(), "\n"), code, nil}
				return
			}
			b.WriteString(line)
		}
	}()
	select {
	case r := <-done:
		return r.out, r.code, r.err
	case <-time.After(timeout):
		sh.cmd.Process.Kill()
		return "", 0, fmt.Errorf("still running after %v", timeout)
	}
}

// TestReadme runs the tested examples of README.md and docs/guide.md,
// each document top to bottom against a fresh node of its own.
func TestReadme(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s: %v (scripts/test-tools.sh installs it)", tool, err)
			}
			t.Skipf("%s: %v (scripts/test-tools.sh installs it)", tool, err)
		}
	}
	for _, doc := range readmeDocs {
		t.Run(doc.path, func(t *testing.T) {
			commands := readmeCommands(t, filepath.Join("..", "..", filepath.FromSlash(doc.path)), doc.path)
			if len(commands) < doc.min {
				t.Fatalf("%s has %d tested commands (after a %q line), want at least %d: were its examples moved to another document? Add that one to readmeDocs", doc.path, len(commands), readmeMarker, doc.min)
			}
			runReadmeCommands(t, doc.path, commands)
		})
	}
}

// runReadmeCommands runs the tested commands of the document name in one
// shell against a fresh node.
func runReadmeCommands(t *testing.T, name string, commands []readmeCommand) {
	t.Helper()
	nd := e2e.StartNode(t)
	bin := filepath.Dir(e2e.LogctlBinary(t)) // logd and logctl
	dir := t.TempDir()
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LOGCTL_SERVER="+nd.Listen, "HOME="+dir, "NO_COLOR=1")
	sh := startReadmeShell(t, dir, env)
	start := time.Now()
	for _, c := range commands {
		cmd := strings.ReplaceAll(c.cmd, "127.0.0.1:7070", nd.Listen)
		out, code, err := sh.run(cmd, 30*time.Second)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v\n%s", name, c.line, c.cmd, err, out)
		}
		if code != c.exitCode {
			t.Fatalf("%s:%d: %s: exit %d, want %d; output:\n%s", name, c.line, c.cmd, code, c.exitCode, out)
		}
		if c.want != nil && !readmeOutputMatches(c.want, normalizeOutput(out)) {
			t.Fatalf("%s:%d: %s: output\n%s\nwant (%s)\n%s", name, c.line, c.cmd, out, name, strings.Join(c.want, "\n"))
		}
	}
	t.Logf("%d commands of %s in %v", len(commands), name, time.Since(start).Round(time.Millisecond))
}

// TestReadmeOutputMatches: the comparison's rules, which a document's
// transcript relies on.
func TestReadmeOutputMatches(t *testing.T) {
	for _, tc := range []struct {
		want  []string
		got   string
		match bool
	}{
		{want: []string{"a  b   c"}, got: "a b c", match: true},
		{want: []string{"x ...z"}, got: "x yyy z", match: true},
		{want: []string{"head", "...", "tail"}, got: "head\n1\n2\ntail", match: true},
		{want: []string{"head", "...", "tail"}, got: "head\ntail", match: true},
		{want: []string{"head", "..."}, got: "head", match: true},
		{want: []string{"...", "x", "..."}, got: "a\nx\nb", match: true},
		{want: []string{"...", "x", "..."}, got: "a\nb", match: false},
		{want: []string{"at <time>  # a comment"}, got: "at 2026-11-29T09:46:26.739Z", match: true},
		{want: []string{"<token> ok"}, got: "0.0.1.bef0b0e4298cfe13 ok", match: true},
		{want: []string{"age <age>"}, got: "age 8.183s", match: true},
		{want: []string{"a"}, got: "a\nb", match: false},
		{want: []string{"a.b"}, got: "axb", match: false},
		{want: []string{"<n> records"}, got: "x records", match: false},
	} {
		if got := readmeOutputMatches(tc.want, normalizeOutput(tc.got)); got != tc.match {
			t.Errorf("%q against %q: %v, want %v", tc.want, tc.got, got, tc.match)
		}
	}
}
