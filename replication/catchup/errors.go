package catchup

import "errors"

// Errors of RestoreBackup; the backup file's own are package
// internal/backupfile's, and those of catch-up the state machine's
// (backend.ErrNoSegmentSource, backend.ErrSegmentGone). Like the state
// machine's, their text names the Raft layer, "replication".
var (
	// ErrRestoreTarget means the data directory to restore into exists
	// and is not empty.
	ErrRestoreTarget = errors.New("replication: restore target is not empty")
	// ErrBackupTooNew means the backup was taken at a feature level above
	// this build's: its state holds commands this build cannot apply.
	ErrBackupTooNew = errors.New("replication: backup needs a newer build")
)
