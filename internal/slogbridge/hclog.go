package slogbridge

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// LevelTrace is the slog level of hclog's Trace lines.
const LevelTrace = slog.LevelDebug - 4

// hcLogger implements hclog.Logger over a slog.Handler.
type hcLogger struct {
	h     slog.Handler // with the implied arguments applied
	name  string
	level *hclog.Level // shared by loggers derived with With and Named, as in hclog
	args  []any        // implied arguments, for ImpliedArgs
}

// HCLog returns an hclog.Logger that writes to h, named name (the
// "logger" attribute; empty for none), at level and above.
func HCLog(h slog.Handler, name string, level hclog.Level) hclog.Logger {
	lv := level
	return &hcLogger{h: h, name: name, level: &lv}
}

// slogLevel maps an hclog level to slog's.
func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return LevelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// enabled reports whether a line at l would be written.
func (l *hcLogger) enabled(lv hclog.Level) bool {
	if lv == hclog.Off || lv == hclog.NoLevel {
		lv = hclog.Info
	}
	min := *l.level
	if min == hclog.NoLevel {
		min = hclog.Info
	}
	return lv >= min && min != hclog.Off && l.h.Enabled(context.Background(), slogLevel(lv))
}

// Log implements hclog.Logger.
func (l *hcLogger) Log(level hclog.Level, msg string, args ...any) {
	if !l.enabled(level) {
		return
	}
	lg := slog.New(l.h)
	if l.name != "" {
		args = append([]any{"logger", l.name}, args...)
	}
	lg.Log(context.Background(), slogLevel(level), msg, fixArgs(args)...)
}

// fixArgs turns hclog's argument conventions into slog's: an
// hclog.Format value is printf-formatted; an odd trailing value is
// hclog's EXTRA_VALUE_AT_END.
func fixArgs(args []any) []any {
	out := make([]any, len(args), len(args)+1)
	for i, a := range args {
		if f, ok := a.(hclog.Format); ok && len(f) > 0 {
			if s, ok := f[0].(string); ok {
				a = fmt.Sprintf(s, f[1:]...)
			}
		}
		out[i] = a
	}
	if len(out)%2 == 1 {
		out = append(out[:len(out)-1], "EXTRA_VALUE_AT_END", out[len(out)-1])
	}
	return out
}

// Trace implements hclog.Logger.
func (l *hcLogger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }

// Debug implements hclog.Logger.
func (l *hcLogger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }

// Info implements hclog.Logger.
func (l *hcLogger) Info(msg string, args ...any) { l.Log(hclog.Info, msg, args...) }

// Warn implements hclog.Logger.
func (l *hcLogger) Warn(msg string, args ...any) { l.Log(hclog.Warn, msg, args...) }

// Error implements hclog.Logger.
func (l *hcLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

// IsTrace implements hclog.Logger.
func (l *hcLogger) IsTrace() bool { return l.enabled(hclog.Trace) }

// IsDebug implements hclog.Logger.
func (l *hcLogger) IsDebug() bool { return l.enabled(hclog.Debug) }

// IsInfo implements hclog.Logger.
func (l *hcLogger) IsInfo() bool { return l.enabled(hclog.Info) }

// IsWarn implements hclog.Logger.
func (l *hcLogger) IsWarn() bool { return l.enabled(hclog.Warn) }

// IsError implements hclog.Logger.
func (l *hcLogger) IsError() bool { return l.enabled(hclog.Error) }

// ImpliedArgs implements hclog.Logger.
func (l *hcLogger) ImpliedArgs() []any { return l.args }

// With implements hclog.Logger.
func (l *hcLogger) With(args ...any) hclog.Logger {
	args = fixArgs(args)
	c := *l
	c.h = slog.New(l.h).With(args...).Handler()
	c.args = append(append([]any(nil), l.args...), args...)
	return &c
}

// Name implements hclog.Logger.
func (l *hcLogger) Name() string { return l.name }

// Named implements hclog.Logger: the name is appended to the current one
// with a dot.
func (l *hcLogger) Named(name string) hclog.Logger {
	c := *l
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

// ResetNamed implements hclog.Logger.
func (l *hcLogger) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	return &c
}

// SetLevel implements hclog.Logger; it changes the level of every logger
// derived from the same HCLog call. Like hclog's own, it is meant for
// start-up, not for concurrent use with logging.
func (l *hcLogger) SetLevel(level hclog.Level) { *l.level = level }

// GetLevel implements hclog.Logger.
func (l *hcLogger) GetLevel() hclog.Level { return *l.level }

// StandardLogger implements hclog.Logger.
func (l *hcLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

// StandardWriter implements hclog.Logger: each line written is one log
// line, at Info, or with InferLevels at the level its "[ERROR]", "[WARN]",
// "[DEBUG]" or "[TRACE]" prefix names.
func (l *hcLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	infer := opts != nil && (opts.InferLevels || opts.InferLevelsWithTimestamp)
	return &stdWriter{l: l, infer: infer}
}

// stdWriter is StandardWriter's io.Writer.
type stdWriter struct {
	l     *hcLogger
	infer bool
}

func (w *stdWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		msg, level := strings.TrimSpace(string(line)), hclog.Info
		if w.infer {
			msg, level = inferLevel(msg)
		}
		w.l.Log(level, msg)
	}
	return len(p), nil
}

// inferLevel reads a "[LEVEL]" prefix (after a timestamp, if any).
func inferLevel(s string) (string, hclog.Level) {
	for _, p := range []struct {
		tag   string
		level hclog.Level
	}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info}, {"[WARN]", hclog.Warn}, {"[ERR]", hclog.Error}, {"[ERROR]", hclog.Error}} {
		if i := strings.Index(s, p.tag); i >= 0 {
			return strings.TrimSpace(s[i+len(p.tag):]), p.level
		}
	}
	return s, hclog.Info
}

var _ hclog.Logger = (*hcLogger)(nil)
