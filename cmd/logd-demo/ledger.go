package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
)

// ledger is a handler's own database in the credit story. The issue asks
// for SQLite; it is not available to this module as a small dependency, so
// the ledger is a JSON file committed atomically (write a temporary file,
// fsync, rename over the old one): a commit either happens whole or not at
// all, which is the property the story needs. The idempotent handler puts
// the job id in the same commit as the credit, as it would put it in a
// processed_jobs table in the same SQL transaction.
type ledger struct {
	path string
}

// ledgerState is one committed version of the ledger.
type ledgerState struct {
	Balances map[string]int  `json:"balances"`
	Applied  map[string]bool `json:"applied_jobs"`
}

func newLedger(dir, name string) *ledger { return &ledger{path: filepath.Join(dir, name+".json")} }

// begin reads the last committed state (a transaction's snapshot).
func (l *ledger) begin() (ledgerState, error) {
	st := ledgerState{Balances: map[string]int{}, Applied: map[string]bool{}}
	b, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// commit makes st the ledger's state atomically.
func (l *ledger) commit(st ledgerState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := l.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, l.path)
}

// creditUnsafe adds amount with no memory of the job: a redelivery credits
// twice.
func (l *ledger) creditUnsafe(account string, amount int) error {
	st, err := l.begin()
	if err != nil {
		return err
	}
	st.Balances[account] += amount
	return l.commit(st)
}

// creditOnce adds amount and records jobID in the same commit; a job
// already recorded changes nothing.
func (l *ledger) creditOnce(jobID, account string, amount int) (applied bool, err error) {
	st, err := l.begin()
	if err != nil {
		return false, err
	}
	if st.Applied[jobID] {
		return false, nil
	}
	st.Balances[account] += amount
	st.Applied[jobID] = true
	return true, l.commit(st)
}

func (l *ledger) balance(account string) (int, error) {
	st, err := l.begin()
	return st.Balances[account], err
}
