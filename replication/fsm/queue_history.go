package fsm

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/queue"
)

// The attempt history of a dead-letter record (from QueueLevel): the
// logd-dlq-history header holds JSON of this schema (docs/guide.md, "Work
// queues"; version 1):
//
//	{"version": 1,
//	 "attempts": [{"delivery": 1, "claimed": "<RFC 3339>", "worker": "host/42",
//	   "lease_until": "<RFC 3339>", "extensions": 0, "ended": "<RFC 3339>",
//	   "outcome": "nacked", "error": "ledger timeout", "redrive": 0}, ...],
//	 "dropped_attempts": 0}
//
// attempts are oldest first; outcome is acked, nacked, rejected,
// lease_expired, deadline_exceeded, expired or invalid_deadline (the last
// three are a claim's decision not to deliver, with no worker or lease);
// error_truncated marks an error cut to 1 KiB, error_dropped one dropped
// for the group's history budget; redrive is the record's redrive count
// when the attempt ran (0 before any). A redriven record carries its
// history in the logd-redrive-history header (a redrive job copies it,
// package replication/redrive), and its next dead letter appends to it,
// keeping the last maxDLQHistoryAttempts; dropped_attempts counts the
// attempts left out, and previous_unreadable marks a redrive history that
// was not valid JSON.
const (
	RedriveHeaderHistory = "logd-redrive-history"
	redriveCountHeader   = "logd-redrive-count"
	dlqHistoryVersion    = 1
	// maxDLQHistoryAttempts bounds the attempts of a dead letter's
	// history across redrives.
	maxDLQHistoryAttempts = 2 * queue.MaxAttempts
)

// dlqHistory is the logd-dlq-history header's JSON.
type dlqHistory struct {
	Version            int          `json:"version"`
	Attempts           []dlqAttempt `json:"attempts"`
	DroppedAttempts    uint32       `json:"dropped_attempts,omitempty"`
	PreviousUnreadable bool         `json:"previous_unreadable,omitempty"`
}

// dlqAttempt is one attempt in dlqHistory.
type dlqAttempt struct {
	Delivery       uint32 `json:"delivery"`
	Claimed        string `json:"claimed"`
	Worker         string `json:"worker,omitempty"`
	LeaseUntil     string `json:"lease_until,omitempty"`
	Extensions     uint32 `json:"extensions"`
	Ended          string `json:"ended,omitempty"`
	Outcome        string `json:"outcome"`
	Error          string `json:"error,omitempty"`
	ErrorTruncated bool   `json:"error_truncated,omitempty"`
	ErrorDropped   bool   `json:"error_dropped,omitempty"`
	Redrive        int    `json:"redrive"`
}

func rfc3339(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// historyHeader builds the logd-dlq-history header of a dead letter from
// the record's attempts, appended to the history its redrive carried (in
// headers), and returns the original headers without that one.
func historyHeader(d queue.DeadLetter, headers []batch.Header) (batch.Header, []batch.Header) {
	h := dlqHistory{Version: dlqHistoryVersion}
	redrive := 0
	kept := make([]batch.Header, 0, len(headers))
	for _, hd := range headers {
		switch hd.Key {
		case RedriveHeaderHistory:
			var prev dlqHistory
			if err := json.Unmarshal(hd.Value, &prev); err != nil || prev.Version != dlqHistoryVersion {
				h.PreviousUnreadable = true
			} else {
				h.Attempts, h.DroppedAttempts, h.PreviousUnreadable = prev.Attempts, prev.DroppedAttempts, prev.PreviousUnreadable
			}
			continue
		case redriveCountHeader:
			redrive, _ = strconv.Atoi(string(hd.Value))
		}
		kept = append(kept, hd)
	}
	h.DroppedAttempts += d.HistoryDropped
	for _, a := range d.History {
		h.Attempts = append(h.Attempts, dlqAttempt{Delivery: a.Delivery, Claimed: rfc3339(a.Claimed), Worker: a.Worker, LeaseUntil: rfc3339(a.LeaseUntil),
			Extensions: a.Extends, Ended: rfc3339(a.Ended), Outcome: a.Outcome, Error: a.Error, ErrorTruncated: a.ErrorCut, ErrorDropped: a.ErrorDropped, Redrive: redrive})
	}
	if n := len(h.Attempts); n > maxDLQHistoryAttempts {
		h.DroppedAttempts += uint32(n - maxDLQHistoryAttempts)
		h.Attempts = h.Attempts[n-maxDLQHistoryAttempts:]
	}
	if h.Attempts == nil {
		h.Attempts = []dlqAttempt{}
	}
	b, _ := json.Marshal(h) // plain structs: cannot fail
	return batch.Header{Key: backend.DLQHeaderHistory, Value: b}, kept
}
