package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Where a flag's effective value came from, in order of precedence: the
// command line wins over the environment, which wins over the
// configuration file, which wins over the default.
const (
	sourceFlag    = "flag"
	sourceEnv     = "env"
	sourceFile    = "file"
	sourceDefault = "default"
)

// configFlag names the flag of the configuration file; its variable is
// LOGD_CONFIG, and the file cannot name itself.
const configFlag = "config"

// envName is the variable of the flag name: LOGD_ and the name in upper
// case with underscores, except --superuser, whose variable lists several.
func envName(name string) string {
	if name == "superuser" {
		return "LOGD_SUPERUSERS"
	}
	return "LOGD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// ConfigError is a configuration file that cannot be used: unreadable, not
// YAML, or naming a key that is no flag of logd run.
type ConfigError struct {
	// Path is the file's path.
	Path string
	// Key is the offending key, if one is.
	Key string
	// Err says what is wrong.
	Err error
}

func (e *ConfigError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("config file %s: key %q: %v", e.Path, e.Key, e.Err)
	}
	return fmt.Sprintf("config file %s: %v", e.Path, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// errUnknownKey is a configuration file's key that names no flag.
var errUnknownKey = errors.New("unknown key: not a flag of logd run (logd run --help lists them)")

// layerSources fills the flags of fs not given on the command line from
// their LOGD_* variable, else from the configuration file (--config or
// LOGD_CONFIG), and returns each flag's source. A bad value names its
// source; an unknown key in the file is an error and sets nothing.
func layerSources(fs *pflag.FlagSet, getenv func(string) string) (map[string]string, error) {
	src := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		src[f.Name] = sourceDefault
		if f.Changed {
			src[f.Name] = sourceFlag
		}
	})
	file, path, err := readConfigFile(fs, getenv, src)
	if err != nil {
		return nil, err
	}
	var firstErr error
	fs.VisitAll(func(f *pflag.Flag) {
		if firstErr != nil || f.Changed || f.Name == configFlag {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			vals := []string{v}
			if f.Value.Type() == listType {
				vals = strings.Split(v, ",")
			}
			for _, v := range vals {
				if err := f.Value.Set(v); err != nil {
					firstErr = fmt.Errorf("%s: invalid value %q for --%s: %w", envName(f.Name), v, f.Name, err)
					return
				}
			}
			src[f.Name] = sourceEnv
			return
		}
		vals, ok := file[f.Name]
		if !ok {
			return
		}
		for _, v := range vals {
			if err := f.Value.Set(v); err != nil {
				firstErr = &ConfigError{Path: path, Key: f.Name, Err: fmt.Errorf("invalid value %q: %w", v, err)}
				return
			}
		}
		src[f.Name] = sourceFile
	})
	return src, firstErr
}

// readConfigFile reads the configuration file fs's --config (or
// LOGD_CONFIG) names, if any: a YAML mapping of flag names to values (a
// list for a repeatable flag). It returns each key's values as strings.
func readConfigFile(fs *pflag.FlagSet, getenv func(string) string, src map[string]string) (map[string][]string, string, error) {
	f := fs.Lookup(configFlag)
	path := f.Value.String()
	if !f.Changed {
		if path = getenv(envName(configFlag)); path == "" {
			return nil, "", nil
		}
		src[configFlag] = sourceEnv
		if err := f.Value.Set(path); err != nil { // for the configuration log
			return nil, path, err
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, path, &ConfigError{Path: path, Err: err}
	}
	var doc map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return nil, path, &ConfigError{Path: path, Err: fmt.Errorf("want a YAML mapping of flag names to values: %w", err)}
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string][]string, len(doc))
	for _, k := range keys {
		fl := fs.Lookup(k)
		if fl == nil || k == configFlag || k == "help" {
			return nil, path, &ConfigError{Path: path, Key: k, Err: errUnknownKey}
		}
		vals, err := yamlValues(doc[k], fl.Value.Type() == listType)
		if err != nil {
			return nil, path, &ConfigError{Path: path, Key: k, Err: err}
		}
		out[k] = vals
	}
	return out, path, nil
}

// yamlValues turns a configuration value into the strings a flag's Set
// takes: a scalar is one; a list is one per item, for repeatable flags.
func yamlValues(v any, list bool) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, errors.New("no value")
	case string:
		return []string{v}, nil
	case bool:
		return []string{strconv.FormatBool(v)}, nil
	case int:
		return []string{strconv.Itoa(v)}, nil
	case uint64:
		return []string{strconv.FormatUint(v, 10)}, nil
	case float64:
		return []string{strconv.FormatFloat(v, 'f', -1, 64)}, nil
	case []any:
		if !list {
			return nil, errors.New("want a single value, got a list")
		}
		var out []string
		for _, item := range v {
			vals, err := yamlValues(item, false)
			if err != nil {
				return nil, err
			}
			out = append(out, vals...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a scalar value, got %T", v)
}

// effectiveConfig lists every flag of fs (as slog key-value pairs, sorted
// by name) with its value and source, for the log line at start. A
// password in a URL's user information is redacted; no flag holds a secret
// itself: secrets come in files (keys, token files), whose paths are
// shown, never their contents.
func effectiveConfig(fs *pflag.FlagSet, src map[string]string) []any {
	var out []any
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		v := f.Value.String()
		if v == "" {
			v = `""`
		}
		out = append(out, f.Name, redactURL(v)+" ("+src[f.Name]+")")
	})
	return out
}

// redactURL replaces the password of a URL's user information in v.
func redactURL(v string) string {
	if !strings.Contains(v, "@") || !strings.Contains(v, "://") {
		return v
	}
	u, err := url.Parse(v)
	if err != nil || u.User == nil {
		return v
	}
	return u.Redacted()
}

// longFlagArgs rewrites the single-dash long flags of args that fs knows
// (-data-dir x, -listen=:7070) to their double-dash form, so that scripts
// written for the standard flag package keep working. It stops at "--";
// a single dash before one letter is left to pflag.
func longFlagArgs(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if fs.Lookup(name) != nil || name == "help" {
			out[i] = "-" + a
		}
	}
	return out
}
