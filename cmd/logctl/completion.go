package main

import (
	"github.com/spf13/cobra"
)

// newCompletionCmd builds `completion bash|zsh|fish`, cobra's generated
// scripts. It is built here rather than taken from cobra's default
// command so that it has an example like every other command and no
// shells the user guide (docs/guide.md) does not cover.
func newCompletionCmd(opts *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script for bash, zsh or fish",
		Long: `Print a script that completes logctl's commands and flags in bash, zsh or
fish. Load it in the current shell, or install it where the shell looks:

  bash: source <(logctl completion bash), or save it as
        /etc/bash_completion.d/logctl (needs the bash-completion package)
  zsh:  logctl completion zsh > "${fpath[1]}/_logctl" (with compinit enabled)
  fish: logctl completion fish > ~/.config/fish/completions/logctl.fish`,
		Example: `  logctl completion bash > /etc/bash_completion.d/logctl
  logctl completion zsh > "${fpath[1]}/_logctl"
  logctl completion fish > ~/.config/fish/completions/logctl.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(opts.stdout, true)
			case "zsh":
				return root.GenZshCompletion(opts.stdout)
			default:
				return root.GenFishCompletion(opts.stdout, true)
			}
		},
	}
}
