package pgtest_test

import (
	"errors"
	"net"
	"os"
	"testing"

	"github.com/logd-dev/logd/internal/pgtest"
)

func TestStartStop(t *testing.T) {
	s, err := pgtest.Start()
	if errors.Is(err, pgtest.ErrNoPostgres) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("%s still answers after Stop", addr)
	}
}
