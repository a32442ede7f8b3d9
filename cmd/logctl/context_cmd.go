package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
)

func newContextCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Named clusters with their server, TLS files and token file",
		Long: `A context names a cluster and the credentials to reach it: a server, TLS
files and a token file (a file name, never the token itself). The current
context is used when no --server, TLS or token flag or variable says
otherwise; --context NAME or LOGCTL_CONTEXT picks another for one call.

For each setting, the first given of these wins: its flag, its environment
variable, the context, the default. A --server (or LOGCTL_SERVER) without
--context means another cluster: the current context is then not used, so
its credentials are never sent elsewhere. Contexts are kept in
<config dir>/logctl/` + contextsFileName + ` (the config dir is $XDG_CONFIG_HOME, else
~/.config, on Linux; ~/Library/Application Support on macOS).`,
	}
	cmd.AddCommand(newContextAddCmd(opts), newContextUseCmd(opts), newContextListCmd(opts), newContextRemoveCmd(opts))
	return cmd
}

func newContextAddCmd(opts *globalOpts) *cobra.Command {
	var (
		description string
		use, force  bool
	)
	cmd := &cobra.Command{
		Use:   "add NAME --server ADDR [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--token-file FILE]",
		Short: "Add a context from the --server, --tls-* and --token-file flags",
		Long: `Add a context named NAME from the flags given on this command line (not from
environment variables): --server (required), --tls-ca, --tls-cert and
--tls-key, --token-file. File names are stored absolute and must name
readable files now. --token is refused: a context names a token file, so
the secret stays in it. The first context added becomes the current one;
--use makes any one current. --force replaces a context of that name.`,
		Example: `  logctl context add prod --server https://10.0.0.1:7070 --tls-ca ca.pem --token-file ~/.logd/prod.token --use
  logctl context add local --server 127.0.0.1:7070 --description "make run"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !contextNameRE.MatchString(name) {
				return usagef("context name %q: want up to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
			}
			if opts.token != "" {
				return usagef("a context holds a token file, never the token: give --token-file")
			}
			if opts.server == "" {
				return usagef("context add needs --server")
			}
			if (opts.tls.cert == "") != (opts.tls.key == "") {
				return usagef("a client certificate needs both --tls-cert and --tls-key")
			}
			e := contextEntry{Server: opts.server, Description: description}
			for _, f := range []struct {
				flag, value string
				dst         *string
			}{
				{"--tls-ca", opts.tls.ca, &e.TLSCA},
				{"--tls-cert", opts.tls.cert, &e.TLSCert},
				{"--tls-key", opts.tls.key, &e.TLSKey},
				{"--token-file", opts.tokenFile, &e.TokenFile},
			} {
				if f.value == "" {
					continue
				}
				abs, err := filepath.Abs(f.value)
				if err != nil {
					return usagef("%s %s: %v", f.flag, f.value, err)
				}
				if _, err := readCredential(setting{abs, f.flag}); err != nil {
					return err
				}
				*f.dst = abs
			}
			path, err := contextsPath()
			if err != nil {
				return err
			}
			cf, err := loadContexts(path)
			if err != nil {
				return err
			}
			if _, exists := cf.Contexts[name]; exists && !force {
				return fmt.Errorf("context %q exists; --force replaces it", name)
			}
			cf.Contexts[name] = e
			if use || cf.Current == "" {
				cf.Current = name
			}
			if err := cf.save(path); err != nil {
				return err
			}
			current := ""
			if cf.Current == name {
				current = " (current)"
			}
			fmt.Fprintf(opts.stdout, "added context %s%s: %s\n", name, current, e.Server)
			return nil
		},
	}
	cmd.Flags().StringVar(&description, "description", "", "what the context is for")
	cmd.Flags().BoolVar(&use, "use", false, "make it the current context")
	cmd.Flags().BoolVar(&force, "force", false, "replace a context of the same name")
	return cmd
}

func newContextUseCmd(opts *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:               "use NAME",
		Short:             "Make a context the current one",
		Example:           `  logctl context use prod`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeContextNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := contextsPath()
			if err != nil {
				return err
			}
			cf, err := loadContexts(path)
			if err != nil {
				return err
			}
			if _, ok := cf.Contexts[args[0]]; !ok {
				return cf.unknown(args[0])
			}
			cf.Current = args[0]
			if err := cf.save(path); err != nil {
				return err
			}
			fmt.Fprintf(opts.stdout, "current context: %s (%s)\n", args[0], cf.Contexts[args[0]].Server)
			return nil
		},
	}
}

// contextRow is a context in `context list`.
type contextRow struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	contextEntry
}

func newContextListCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the contexts; * marks the current one",
		Example: `  logctl context list
  logctl context list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			path, err := contextsPath()
			if err != nil {
				return err
			}
			cf, err := loadContexts(path)
			if err != nil {
				return err
			}
			rows := make([]contextRow, 0, len(cf.Contexts))
			for _, n := range cf.names() {
				rows = append(rows, contextRow{Name: n, Current: n == cf.Current, contextEntry: cf.Contexts[n]})
			}
			if output != outputText {
				return writeData(opts.stdout, output, rows)
			}
			tw := newTable(opts.stdout)
			fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER\tTLS CA\tCLIENT CERT\tTOKEN FILE\tDESCRIPTION")
			for _, r := range rows {
				mark := ""
				if r.Current {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", mark, r.Name, r.Server, dash(r.TLSCA), dash(r.TLSCert), dash(r.TokenFile), dash(r.Description))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(rows) == 0 {
				fmt.Fprintf(opts.stderr, "no contexts in %s; add one with logctl context add\n", path)
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func newContextRemoveCmd(opts *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:               "remove NAME",
		Short:             "Remove a context (the files it names are left alone)",
		Example:           `  logctl context remove staging`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeContextNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := contextsPath()
			if err != nil {
				return err
			}
			cf, err := loadContexts(path)
			if err != nil {
				return err
			}
			if _, ok := cf.Contexts[args[0]]; !ok {
				return cf.unknown(args[0])
			}
			delete(cf.Contexts, args[0])
			note := ""
			if cf.Current == args[0] {
				cf.Current = ""
				note = "; no context is current now"
			}
			if err := cf.save(path); err != nil {
				return err
			}
			fmt.Fprintf(opts.stdout, "removed context %s%s\n", args[0], note)
			return nil
		},
	}
}

// completeContextNames completes a context name from the contexts file.
func completeContextNames(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	path, err := contextsPath()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cf, err := loadContexts(path)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return cf.names(), cobra.ShellCompDirectiveNoFileComp
}
