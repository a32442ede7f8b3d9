package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication/replicationtest"
	"github.com/logd-dev/logd/server"
)

// probeEnv serves a node (bootstrapped, and then leading, or not) over
// HTTP/1.1 and cleartext HTTP/2, as cmd/logd does, so gRPC clients reach
// it too.
func probeEnv(t *testing.T, bootstrap bool) (*httptest.Server, *http.Client) {
	t.Helper()
	n := replicationtest.Start(t, replicationtest.Options{NoBootstrap: !bootstrap})
	srv := server.New(server.Options{Backend: n.Backend, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewUnstartedServer(srv.Handler())
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	hs.Config.Protocols = &protocols
	hs.Start()
	t.Cleanup(hs.Close)
	// The client speaks cleartext HTTP/2 only, as gRPC clients do.
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &h2}}
	t.Cleanup(h2c.CloseIdleConnections)
	return hs, h2c
}

// checkHealth asks grpc.health.v1 Check for service over the Connect
// protocol and over gRPC, and requires both to agree.
func checkHealth(t *testing.T, ctx context.Context, hs *httptest.Server, h2c *http.Client, service string) (grpchealth.Status, error) {
	t.Helper()
	connectResp, connectErr := grpchealth.NewClient(hs.Client(), hs.URL).Check(ctx, &grpchealth.CheckRequest{Service: service})
	grpcResp, grpcErr := grpchealth.NewClient(h2c, hs.URL, connect.WithGRPC()).Check(ctx, &grpchealth.CheckRequest{Service: service})
	if connect.CodeOf(connectErr) != connect.CodeOf(grpcErr) {
		t.Fatalf("Check(%q): Connect says %v, gRPC says %v", service, connectErr, grpcErr)
	}
	if connectErr != nil {
		return 0, connectErr
	}
	if connectResp.Status != grpcResp.Status {
		t.Fatalf("Check(%q): Connect says %v, gRPC says %v", service, connectResp.Status, grpcResp.Status)
	}
	return connectResp.Status, nil
}

// readyz returns /readyz's status code.
func readyz(t *testing.T, hs *httptest.Server) int {
	t.Helper()
	resp, err := hs.Client().Get(hs.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestGRPCHealth: grpc.health.v1 answers SERVING for the node and for
// logd.v1.LogService once the node leads and is ready, NOT_SERVING on a
// node that knows no leader (never bootstrapped, never joined), NOT_FOUND
// for another service, and agrees with /readyz each time.
func TestGRPCHealth(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	t.Run("no leader", func(t *testing.T) {
		hs, h2c := probeEnv(t, false)
		for _, service := range []string{"", logdv1connect.LogServiceName} {
			if st, err := checkHealth(t, ctx, hs, h2c, service); err != nil || st != grpchealth.StatusNotServing {
				t.Errorf("Check(%q) = %v, %v; want NOT_SERVING", service, st, err)
			}
		}
		if code := readyz(t, hs); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz = %d, want 503", code)
		}
	})

	t.Run("leader", func(t *testing.T) {
		hs, h2c := probeEnv(t, true)
		for _, service := range []string{"", logdv1connect.LogServiceName} {
			if st, err := checkHealth(t, ctx, hs, h2c, service); err != nil || st != grpchealth.StatusServing {
				t.Errorf("Check(%q) = %v, %v; want SERVING", service, st, err)
			}
		}
		if _, err := checkHealth(t, ctx, hs, h2c, "no.such.Service"); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("Check(no.such.Service): %v, want NOT_FOUND", err)
		}
		if code := readyz(t, hs); code != http.StatusOK {
			t.Errorf("/readyz = %d, want 200", code)
		}
	})
}

// TestGRPCReflection: gRPC server reflection (as grpcurl uses it) lists
// the log service and health, and describes LogService's methods.
func TestGRPCReflection(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	hs, h2c := probeEnv(t, false)
	stream := grpcreflect.NewClient(h2c, hs.URL, connect.WithGRPC()).NewStream(ctx)
	defer stream.Close()
	names, err := stream.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []protoreflect.FullName{logdv1connect.LogServiceName, grpchealth.HealthV1ServiceName} {
		if !slices.Contains(names, want) {
			t.Errorf("ListServices = %v, missing %s", names, want)
		}
	}
	files, err := stream.FileContainingSymbol(logdv1connect.LogServiceName)
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	for _, f := range files {
		for _, svc := range f.GetService() {
			if svc.GetName() == "LogService" {
				for _, m := range svc.GetMethod() {
					methods = append(methods, m.GetName())
				}
			}
		}
	}
	for _, want := range []string{"Produce", "Fetch", "Status"} {
		if !slices.Contains(methods, want) {
			t.Errorf("LogService methods %v: missing %s", methods, want)
		}
	}
}
