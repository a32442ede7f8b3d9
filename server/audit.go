package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
)

// The audit log (docs/security.md, "Audit log"): one structured line,
// message "audit", per admin action: the procedures whose authzTable row
// has an audit summary (topic creation, deletion and change, an executed
// offset reset, group deletion, queue group creation, change and pause,
// tokens, ACLs, membership and leadership). A line names the procedure,
// the principal and how it authenticated, the client's address, the node
// that forwarded the call if one did, a summary of the request (names,
// never record data or token secrets), the kind of client when it said
// (ClientHeader: "console" for the web console) and the outcome: "ok" or the
// error's code. Refused calls are logged too: by the node that refused
// them, whether it refused them before decoding (unauthenticated), at the
// permission check, or as the follower that checked a write before
// forwarding it (forward_authz.go). A call that runs is logged by the node
// that ran it, the leader for a forwarded write.

// auditInterceptor writes the audit line of an admin call once it has an
// outcome.
func (s *Server) auditInterceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			row := authzTable[req.Spec().Procedure]
			if row.audit == nil {
				return next(ctx, req)
			}
			attrs, ok := row.audit(req.Any())
			if !ok {
				return next(ctx, req)
			}
			resp, err := next(ctx, req)
			s.auditLine(ctx, authFrom(ctx), req.Spec().Procedure, attrs, err)
			return resp, err
		}
	}
}

// auditLine writes one line of the audit log.
func (s *Server) auditLine(ctx context.Context, info *authInfo, procedure string, request []slog.Attr, err error) {
	outcome := "ok"
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		outcome = ce.Code().String()
	case err != nil:
		outcome = connect.CodeUnknown.String()
	}
	attrs := []slog.Attr{
		slog.String("procedure", strings.TrimPrefix(procedure, "/"+logdv1connect.LogServiceName+"/")),
		slog.String("principal", info.principal.String()),
		slog.String("auth", info.method),
		slog.String("remote", info.remote),
	}
	if info.forwardedBy != "" {
		attrs = append(attrs, slog.String("forwarded_by", info.forwardedBy))
	}
	if info.client != "" {
		attrs = append(attrs, slog.String("client", info.client))
	}
	if request != nil {
		attrs = append(attrs, slog.Attr{Key: "request", Value: slog.GroupValue(request...)})
	}
	attrs = append(attrs, slog.String("outcome", outcome))
	if err != nil {
		attrs = append(attrs, slog.String("error", logText(err)))
	}
	s.audit.LogAttrs(ctx, slog.LevelInfo, "audit", attrs...)
}

// auditRefusedRequest logs an admin call refused before it was decoded:
// its request is not known, so the line has no summary.
func (s *Server) auditRefusedRequest(r *http.Request, info *authInfo, err error) {
	if row, ok := authzTable[r.URL.Path]; ok && row.audit != nil {
		s.auditLine(r.Context(), info, r.URL.Path, nil, err)
	}
}
