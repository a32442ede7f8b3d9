package faults

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// The environment variables a fault build reads. Unset or empty, each
// injects nothing.
const (
	// EnvPowerCut: "1" puts the partition logs on a PowerCutFS; "nosync"
	// also switches off the durability of Raft's log store (WriteBack).
	EnvPowerCut = "LOGD_FAULT_POWERCUT"
	// EnvSlowFsync: "<duration>[,<jitter>]" added to every sync of the
	// partition logs and every write of Raft's log and stable store.
	EnvSlowFsync = "LOGD_FAULT_SLOW_FSYNC"
	// EnvClockOffset: a duration (may be negative) added to the node's
	// clock.
	EnvClockOffset = "LOGD_FAULT_CLOCK_OFFSET"
)

// Env lists the variables FromEnv reads.
func Env() []string { return []string{EnvPowerCut, EnvSlowFsync, EnvClockOffset} }

// PowerCut is a power-cut mode.
type PowerCut int

// The power-cut modes of EnvPowerCut.
const (
	// PowerCutOff models nothing.
	PowerCutOff PowerCut = iota
	// PowerCutOn models a power cut of the partition logs (PowerCutFS).
	PowerCutOn
	// PowerCutNoSync is PowerCutOn with Raft's log store written back
	// every WriteBackInterval instead of fsynced on every commit.
	PowerCutNoSync
)

// WriteBackInterval is how often PowerCutNoSync writes Raft's log entries
// back to the store.
const WriteBackInterval = 500 * time.Millisecond

// Config is what the LOGD_FAULT_* environment asks for.
type Config struct {
	PowerCut PowerCut
	// SlowSync is added to every sync of the partition logs and every
	// write of Raft's log and stable store.
	SlowSync Delay
	// ClockOffset is added to the node's clock.
	ClockOffset time.Duration
}

// Any reports whether c injects anything.
func (c Config) Any() bool { return c != Config{} }

// FromEnv reads the LOGD_FAULT_* variables through getenv. A malformed
// value is an error naming the variable.
func FromEnv(getenv func(string) string) (Config, error) {
	var c Config
	switch v := getenv(EnvPowerCut); v {
	case "", "0":
	case "1":
		c.PowerCut = PowerCutOn
	case "nosync":
		c.PowerCut = PowerCutNoSync
	default:
		return c, fmt.Errorf("%s: want 1 or nosync, got %q", EnvPowerCut, v)
	}
	if v := getenv(EnvSlowFsync); v != "" {
		d, err := ParseDelay(v)
		if err != nil {
			return c, fmt.Errorf("%s: %w", EnvSlowFsync, err)
		}
		c.SlowSync = d
	}
	if v := getenv(EnvClockOffset); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return c, fmt.Errorf("%s: %w", EnvClockOffset, err)
		}
		c.ClockOffset = d
	}
	return c, nil
}

// Delay is a latency: Base plus a uniformly random part of up to Jitter.
type Delay struct {
	Base, Jitter time.Duration
}

// ParseDelay parses "<duration>" or "<duration>,<jitter>", neither
// negative.
func ParseDelay(s string) (Delay, error) {
	base, jitter, hasJitter := strings.Cut(s, ",")
	var d Delay
	var err error
	if d.Base, err = time.ParseDuration(base); err != nil {
		return Delay{}, fmt.Errorf("delay %q: %w", s, err)
	}
	if hasJitter {
		if d.Jitter, err = time.ParseDuration(jitter); err != nil {
			return Delay{}, fmt.Errorf("delay %q: jitter: %w", s, err)
		}
	}
	if d.Base < 0 || d.Jitter < 0 {
		return Delay{}, fmt.Errorf("delay %q: negative", s)
	}
	return d, nil
}

// Zero reports whether d adds nothing.
func (d Delay) Zero() bool { return d.Base == 0 && d.Jitter == 0 }

// Sleep sleeps for one draw of d.
func (d Delay) Sleep() {
	if d.Zero() {
		return
	}
	t := d.Base
	if d.Jitter > 0 {
		t += rand.N(d.Jitter)
	}
	time.Sleep(t)
}

// String formats d as ParseDelay reads it.
func (d Delay) String() string {
	if d.Jitter == 0 {
		return d.Base.String()
	}
	return d.Base.String() + "," + d.Jitter.String()
}

// OffsetClock returns a clock offset from time.Now by d.
func OffsetClock(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}
