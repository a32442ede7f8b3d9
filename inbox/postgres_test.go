package inbox_test

import (
	"database/sql"
	"testing"
)

func postgresDB(t *testing.T) *sql.DB { t.Skip("postgres: not yet"); return nil }

func stopPostgres() {}
