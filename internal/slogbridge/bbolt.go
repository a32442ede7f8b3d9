package slogbridge

import (
	"context"
	"fmt"
	"log/slog"

	"go.etcd.io/bbolt"
)

// bboltLogger implements bbolt.Logger over a slog.Logger.
type bboltLogger struct{ l *slog.Logger }

// Bbolt returns a bbolt.Logger that writes to l. Its Fatal and Panic
// lines are logged at Error; Fatal then panics as well, like Panic,
// rather than exit the process behind the node's back (bbolt calls
// neither today).
func Bbolt(l *slog.Logger) bbolt.Logger { return bboltLogger{l} }

func (b bboltLogger) log(level slog.Level, msg string) {
	b.l.Log(context.Background(), level, msg)
}

// Debug implements bbolt.Logger.
func (b bboltLogger) Debug(v ...any) { b.log(slog.LevelDebug, fmt.Sprint(v...)) }

// Debugf implements bbolt.Logger.
func (b bboltLogger) Debugf(f string, v ...any) { b.log(slog.LevelDebug, fmt.Sprintf(f, v...)) }

// Info implements bbolt.Logger. bbolt's Info lines are logged at Debug:
// they narrate every open and close of the file (with its options), which
// says nothing to an operator of a healthy node.
func (b bboltLogger) Info(v ...any) { b.log(slog.LevelDebug, fmt.Sprint(v...)) }

// Infof implements bbolt.Logger, at Debug as Info.
func (b bboltLogger) Infof(f string, v ...any) { b.log(slog.LevelDebug, fmt.Sprintf(f, v...)) }

// Warning implements bbolt.Logger.
func (b bboltLogger) Warning(v ...any) { b.log(slog.LevelWarn, fmt.Sprint(v...)) }

// Warningf implements bbolt.Logger.
func (b bboltLogger) Warningf(f string, v ...any) { b.log(slog.LevelWarn, fmt.Sprintf(f, v...)) }

// Error implements bbolt.Logger.
func (b bboltLogger) Error(v ...any) { b.log(slog.LevelError, fmt.Sprint(v...)) }

// Errorf implements bbolt.Logger.
func (b bboltLogger) Errorf(f string, v ...any) { b.log(slog.LevelError, fmt.Sprintf(f, v...)) }

// Fatal implements bbolt.Logger.
func (b bboltLogger) Fatal(v ...any) { b.Panic(v...) }

// Fatalf implements bbolt.Logger.
func (b bboltLogger) Fatalf(f string, v ...any) { b.Panicf(f, v...) }

// Panic implements bbolt.Logger.
func (b bboltLogger) Panic(v ...any) {
	msg := fmt.Sprint(v...)
	b.log(slog.LevelError, msg)
	panic(msg)
}

// Panicf implements bbolt.Logger.
func (b bboltLogger) Panicf(f string, v ...any) {
	msg := fmt.Sprintf(f, v...)
	b.log(slog.LevelError, msg)
	panic(msg)
}
