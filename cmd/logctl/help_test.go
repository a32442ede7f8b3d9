package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasAnExample walks the command tree: each command that
// runs (save cobra's help) shows at least one example, and every example
// line is a comment or a logctl command line (up to a pipe) that names an
// existing command with flags and arguments it accepts.
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Name() == "help" || !c.Runnable() || c.Annotations[groupOnly] != "" {
			return
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no example", c.CommandPath())
			return
		}
		for _, line := range strings.Split(c.Example, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if err := checkExample(line); err != nil {
				t.Errorf("%q: example %q: %v", c.CommandPath(), line, err)
			}
		}
	}
	walk(newRootCmd(&globalOpts{getenv: func(string) string { return "" }}))
}

// checkExample parses the logctl command of one example line (the part of
// a pipeline that runs logctl, up to a redirection) as logctl would,
// without running it.
func checkExample(line string) error {
	var fields []string
	for _, part := range strings.Split(line, " | ") {
		if f := shellWords(part); len(f) > 0 && f[0] == "logctl" {
			fields = f
			break
		}
	}
	if fields == nil {
		return fmt.Errorf("runs no logctl command")
	}
	if i := slices.Index(fields, ">"); i >= 0 {
		fields = fields[:i]
	}
	root := newRootCmd(&globalOpts{getenv: func(string) string { return "" }})
	root.InitDefaultVersionFlag() // as Execute does: logctl --version runs
	cmd, rest, err := root.Find(fields[1:])
	if err != nil {
		return err
	}
	if cmd == root && slices.Equal(rest, []string{"--version"}) {
		return nil
	}
	if !cmd.Runnable() {
		return fmt.Errorf("%q does not run", cmd.CommandPath())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	return cmd.ValidateArgs(cmd.Flags().Args())
}

// shellWords splits s into words as a shell would for the quoting the
// examples use: blanks separate words, and '...' or "..." hold blanks.
func shellWords(s string) []string {
	var (
		words []string
		word  strings.Builder
		in    bool // a word has started
		quote rune
	)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, word.String())
				word.Reset()
				in = false
			}
		default:
			word.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, word.String())
	}
	return words
}

// TestCompletion: logctl completion prints each shell's script (checked by
// the shell's own syntax check where the shell is installed), refuses
// other shells, and the hidden __complete command the scripts call
// completes subcommands and flags.
func TestCompletion(t *testing.T) {
	for _, tt := range []struct{ shell, want string }{
		{shell: "bash", want: "__start_logctl"},
		{shell: "zsh", want: "#compdef logctl"},
		{shell: "fish", want: "complete -c logctl"},
	} {
		t.Run(tt.shell, func(t *testing.T) {
			r := mustRun(t, nil, "", "completion", tt.shell)
			if !strings.Contains(r.stdout, tt.want) {
				t.Fatalf("completion %s lacks %q", tt.shell, tt.want)
			}
			sh, err := exec.LookPath(tt.shell)
			if err != nil {
				t.Logf("%s not installed: syntax not checked", tt.shell)
				return
			}
			script := filepath.Join(t.TempDir(), "logctl."+tt.shell)
			if err := os.WriteFile(script, []byte(r.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(sh, "-n", script).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", tt.shell, err, out)
			}
		})
	}
	if r := runCLI(t, nil, "", "completion", "powershell"); r.code != exitUsage {
		t.Fatalf("completion powershell: exit %d, want %d (%s)", r.code, exitUsage, r.stderr)
	}
	r := mustRun(t, nil, "", "__complete", "topic", "")
	for _, want := range []string{"create\t", "describe\t", "list\t"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("__complete topic: no %q in\n%s", want, r.stdout)
		}
	}
	r = mustRun(t, nil, "", "__complete", "consume", "t", "--fol")
	if !strings.Contains(r.stdout, "--follow") {
		t.Errorf("__complete consume t --fol: no --follow in\n%s", r.stdout)
	}
}
