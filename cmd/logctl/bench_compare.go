package main

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/logd-dev/logd/client"
)

// keyedTopicSuffix names the topic --compare-keys writes keyed records to,
// beside --topic for the records without keys: each has its own window
// and its own partition logs, both warmed up before the first round.
const keyedTopicSuffix = "-keyed"

// compareRound is one round of --compare-keys: a run without keys and a
// run with them, back to back.
type compareRound struct {
	KeyedFirst bool
	Plain      benchResult
	Keyed      benchResult
}

// change is the round's keyed throughput relative to plain, minus one.
func (r compareRound) change() float64 {
	return r.Keyed.json().RecordsPerSec/r.Plain.json().RecordsPerSec - 1
}

// benchCompareKeys measures what idempotency keys cost: a warm-up run of
// each kind (the keyed one fills the window, so keyed rounds evict as in
// steady state), then rounds of one run without keys and one with them.
// The order alternates from round to round so that a drift of the
// machine (page cache writeback, a disk slowing down) does not favour one
// kind; the rounds are compared pairwise.
func benchCompareKeys(ctx context.Context, c *client.Client, f *benchProduceFlags, prog *progress) ([]compareRound, error) {
	plain, keyed := *f, *f
	plain.idemKeys, keyed.idemKeys = false, true
	keyed.topic = f.topic + keyedTopicSuffix
	if _, err := benchProduce(ctx, c, &keyed, prog); err != nil {
		return nil, fmt.Errorf("warm-up with keys: %w", err)
	}
	if _, err := benchProduce(ctx, c, &plain, prog); err != nil {
		return nil, fmt.Errorf("warm-up without keys: %w", err)
	}
	rounds := make([]compareRound, f.compareRounds)
	for i := range rounds {
		r := &rounds[i]
		r.KeyedFirst = i%2 == 1
		for j := range 2 {
			kind, run, out := "without keys", &plain, &r.Plain
			if (j == 0) == r.KeyedFirst {
				kind, run, out = "with keys", &keyed, &r.Keyed
			}
			res, err := benchProduce(ctx, c, run, prog)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", i+1, kind, err)
			}
			*out = res
		}
	}
	return rounds, nil
}

// compareSummary is what --compare-keys reports, and its JSON form.
type compareSummary struct {
	Rounds []compareRoundJSON `json:"rounds"`
	// Means over the rounds.
	PlainRecordsPerSec float64 `json:"plain_records_per_sec"`
	KeyedRecordsPerSec float64 `json:"keyed_records_per_sec"`
	// Change is the mean of the rounds' keyed/plain - 1 (negative: keys
	// cost throughput); ChangeCI95 the half-width of its 95% confidence
	// interval (Student's t over the rounds; 0 with one round).
	Change     float64 `json:"change"`
	ChangeCI95 float64 `json:"change_ci95"`
}

type compareRoundJSON struct {
	KeyedFirst bool      `json:"keyed_first"`
	Plain      benchJSON `json:"plain"`
	Keyed      benchJSON `json:"keyed"`
	Change     float64   `json:"change"`
}

func summarizeCompare(rounds []compareRound) compareSummary {
	var s compareSummary
	changes := make([]float64, len(rounds))
	for i, r := range rounds {
		rj := compareRoundJSON{KeyedFirst: r.KeyedFirst, Plain: r.Plain.json(), Keyed: r.Keyed.json(), Change: r.change()}
		s.Rounds = append(s.Rounds, rj)
		s.PlainRecordsPerSec += rj.Plain.RecordsPerSec / float64(len(rounds))
		s.KeyedRecordsPerSec += rj.Keyed.RecordsPerSec / float64(len(rounds))
		changes[i] = rj.Change
	}
	s.Change, s.ChangeCI95 = meanCI95(changes)
	return s
}

// meanCI95 returns the mean of xs and the half-width of its 95%
// confidence interval (Student's t); the half-width is 0 for fewer than
// two values.
func meanCI95(xs []float64) (mean, half float64) {
	n := float64(len(xs))
	if n == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x / n
	}
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, studentT975(len(xs)-1) * math.Sqrt(ss/(n-1)/n)
}

// studentT975 is the 97.5th percentile of Student's t with df degrees of
// freedom (two-sided 95%).
func studentT975(df int) float64 {
	table := []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086}
	switch {
	case df < 1:
		return math.NaN()
	case df <= len(table):
		return table[df-1]
	case df <= 30:
		return 2.06
	default:
		return 1.96
	}
}

// printCompare writes --compare-keys' result as an aligned table or JSON.
func printCompare(w io.Writer, output string, s compareSummary) error {
	if output != outputText {
		return writeData(w, output, s)
	}
	pct := func(x float64) string { return fmt.Sprintf("%+.1f%%", 100*x) }
	tw := newTable(w)
	fmt.Fprintln(tw, "ROUND\tFIRST\tWITHOUT KEYS rec/s\tWITH KEYS rec/s\tCHANGE")
	for i, r := range s.Rounds {
		first := "without keys"
		if r.KeyedFirst {
			first = "with keys"
		}
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f\t%s\n", i+1, first, r.Plain.RecordsPerSec, r.Keyed.RecordsPerSec, pct(r.Change))
	}
	change := pct(s.Change)
	if len(s.Rounds) > 1 {
		change += fmt.Sprintf(" ± %.1f%% (95%%)", 100*s.ChangeCI95)
	}
	fmt.Fprintf(tw, "mean\t\t%.0f\t%.0f\t%s\n", s.PlainRecordsPerSec, s.KeyedRecordsPerSec, change)
	return tw.Flush()
}

// checkCompareFlags refuses flags --compare-keys does not combine with.
func checkCompareFlags(f *benchProduceFlags) error {
	if f.compareRounds < 0 {
		return usagef("--compare-keys must not be negative")
	}
	if f.compareRounds > 0 && (f.idemKeys || f.duration > 0 || f.rate > 0 || f.records == 0) {
		return usagef("--compare-keys runs --records records per run, as fast as possible: it does not take --idempotency-keys, --duration or --rate")
	}
	return nil
}
