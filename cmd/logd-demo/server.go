package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/logd-dev/logd/client"
)

// server is one logd process started by the demo.
type server struct {
	cmd  *exec.Cmd
	addr string
	logs *os.File
	done chan error // Wait's result, once
}

// buildLogd builds ./cmd/logd into dir and returns the binary's path.
func buildLogd(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "logd")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/logd-dev/logd/cmd/logd").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build logd: %v\n%s", err, out)
	}
	return bin, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startServer runs bin as a single-node logd with its data in dir and
// waits until it leads.
func startServer(ctx context.Context, bin, dir string) (*server, error) {
	api, err := freeAddr()
	if err != nil {
		return nil, err
	}
	raft, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logs, err := os.Create(filepath.Join(dir, "logd.log"))
	if err != nil {
		return nil, err
	}
	s := &server{addr: api, logs: logs, done: make(chan error, 1)}
	s.cmd = exec.Command(bin, "--data-dir", filepath.Join(dir, "data"), "--listen", api, "--raft-addr", raft, "--node-id", "demo")
	s.cmd.Stdout, s.cmd.Stderr = logs, logs
	if err := s.cmd.Start(); err != nil {
		logs.Close()
		return nil, fmt.Errorf("start logd: %w", err)
	}
	go func() { s.done <- s.cmd.Wait() }()

	c, err := client.New(api, client.Options{Timeout: time.Second, Retry: client.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		s.stop()
		return nil, err
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Status(ctx)
		if err == nil && st.State == "Leader" {
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return nil, fmt.Errorf("logd not leading after 30s (last error %v)", err)
		}
		select {
		case err := <-s.done:
			s.done <- err
			s.stop()
			return nil, fmt.Errorf("logd exited: %v", err)
		case <-time.After(50 * time.Millisecond): // polling a process: no event to wait on
		}
	}
}

// stop ends the process (SIGTERM, then SIGKILL after 10 s) and closes its
// log file.
func (s *server) stop() {
	defer s.logs.Close()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}
