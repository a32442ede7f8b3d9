// Package pgtest starts a throwaway PostgreSQL server for tests: a
// cluster made by initdb in a temporary directory, listening on a free
// 127.0.0.1 port and on a unix socket in that directory, with durability
// off (fsync, synchronous_commit, full_page_writes) since it lives for one
// test binary. It is stopped by the PID in its postmaster.pid and its
// directory removed. initdb refuses to run as root, so under root the
// server runs as the postgres user (Debian's postgresql package makes
// it) through runuser.
//
// It needs no database driver: callers connect with the DSN it gives.
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoPostgres means no PostgreSQL server binaries were found (Debian
// package postgresql; scripts/test-tools.sh installs it).
var ErrNoPostgres = errors.New("pgtest: no PostgreSQL binaries (initdb, postgres)")

// startTimeout bounds initdb and the server's start.
const startTimeout = 60 * time.Second

// Server is a running throwaway cluster. Its superuser is "postgres",
// trusted without a password on 127.0.0.1 and the socket.
type Server struct {
	dir  string
	data string
	port int
	cmd  *exec.Cmd
	done chan error
}

// binDir finds the directory holding initdb and postgres: PATH first,
// then Debian's /usr/lib/postgresql/<version>/bin, newest version first.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	best, bestV := "", -1
	for _, m := range matches {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(m))))
		if err == nil && v > bestV {
			best, bestV = filepath.Dir(m), v
		}
	}
	if best == "" {
		return "", ErrNoPostgres
	}
	return best, nil
}

// asPostgres returns a command that runs name as the postgres user when
// this process is root, and as itself otherwise.
func asPostgres(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// Start makes and starts a cluster. Stop it with Stop.
func Start() (_ *Server, err error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	s := &Server{dir: dir, data: filepath.Join(dir, "data")}
	sock := filepath.Join(dir, "sock")
	for _, d := range []string{s.data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		for _, d := range []string{s.data, sock} {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, fmt.Errorf("pgtest: %w", err)
			}
		}
	}
	initdb := asPostgres(filepath.Join(bin, "initdb"), "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %w: %s", err, out)
	}
	if s.port, err = freePort(); err != nil {
		return nil, err
	}
	s.cmd = asPostgres(filepath.Join(bin, "postgres"), "-D", s.data, "-p", strconv.Itoa(s.port), "-k", sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "logging_collector=off")
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	defer logf.Close()
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// Its own process group: a test's interrupt reaches it through Stop.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.cmd.Wait() }()
	if err := s.waitReady(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits until postmaster.pid says "ready" and the port
// answers.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			s.done <- err
			log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			return fmt.Errorf("pgtest: postgres exited: %v: %s", err, log)
		default:
		}
		b, _ := os.ReadFile(filepath.Join(s.data, "postmaster.pid"))
		if lines := strings.Split(string(b), "\n"); len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready" {
			if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
				c.Close()
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("pgtest: postgres not ready after %v", startTimeout)
}

// Addr is the server's 127.0.0.1 address.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// DSN returns a URL connecting as postgres to the named database.
func (s *Server) DSN(database string) string {
	return "postgres://postgres@" + s.Addr() + "/" + database + "?sslmode=disable"
}

// Stop shuts the server down (a fast shutdown, SIGINT to the PID in
// postmaster.pid; SIGKILL after 10 s), waits for it and removes its
// directory.
func (s *Server) Stop() error {
	defer os.RemoveAll(s.dir)
	b, _ := os.ReadFile(filepath.Join(s.data, "postmaster.pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGINT)
	} else if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(10 * time.Second):
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("pgtest: postgres did not stop within 10 s; killed")
	}
}
