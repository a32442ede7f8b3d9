package server

import (
	"context"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
)

// Probes. /healthz says whether the process should be restarted (its
// state machine stopped after an I/O error); /readyz and gRPC's
// grpc.health.v1 Check say whether it should receive traffic. Both of the
// latter answer from readiness, so a Kubernetes gRPC probe, grpcurl and
// an HTTP probe never disagree.

// readiness reports whether the node should receive traffic and, when it
// should not, why: it stopped after a state-machine failure, it is still
// catching up with its Raft log (or, as a new leader, applying the barrier
// of its term), or it knows no leader, so it can neither take a write nor
// forward one.
func (s *Server) readiness() (ready bool, why string) {
	switch {
	case s.b.Failed() != nil:
		return false, "node stopped after a state machine failure"
	case !s.b.Ready():
		return false, "catching up with the Raft log"
	case s.b.Status().LeaderID == "":
		return false, "no leader known"
	}
	return true, ""
}

// serveReadyz is /readyz: 200 "ready", or 503 with the reason.
func (s *Server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	if ok, why := s.readiness(); !ok {
		http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ready\n"))
}

// healthChecker answers grpc.health.v1 Check for the whole node (service
// "") and for logd.v1.LogService, both from readiness; any other service
// is NOT_FOUND, as the protocol asks. Watch is not offered
// (UNIMPLEMENTED): probes poll.
type healthChecker struct{ s *Server }

// Check implements grpchealth.Checker.
func (h healthChecker) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	switch req.Service {
	case "", logdv1connect.LogServiceName:
	default:
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	if ok, _ := h.s.readiness(); !ok {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// mountProbes adds grpc.health.v1 and gRPC server reflection (v1 and
// v1alpha, which older grpcurl builds ask for) to mux, behind OpsGuard
// like /readyz: a Kubernetes probe carries no credentials, so under
// --auth required they need --metrics-public as /readyz does.
func (s *Server) mountProbes(mux *http.ServeMux) {
	path, h := grpchealth.NewHandler(healthChecker{s})
	mux.Handle(path, s.OpsGuard(h))
	reflector := grpcreflect.NewStaticReflector(logdv1connect.LogServiceName, grpchealth.HealthV1ServiceName)
	path, h = grpcreflect.NewHandlerV1(reflector)
	mux.Handle(path, s.OpsGuard(h))
	path, h = grpcreflect.NewHandlerV1Alpha(reflector)
	mux.Handle(path, s.OpsGuard(h))
}
