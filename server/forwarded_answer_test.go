package server_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/server"
)

// drainBackend leads, has applied index 77, and answers every drain with
// nothing draining (an empty message), as an undo does.
type drainBackend struct{ statusBackend }

func (b *drainBackend) AppliedIndex() uint64 { return 77 }
func (b *drainBackend) DrainNode(context.Context, string, bool) ([]string, error) {
	return nil, nil
}

// TestAppliedIndexOnEmptyAnswers: the leader's answer to a forwarded call
// carries the index it applied even when the answer has no body (Connect
// writes none for an empty message in the binary codec), so the
// forwarding node's next read waits for the write. A drain's undo
// through a follower, then a balance plan through it, saw the node still
// draining before.
func TestAppliedIndexOnEmptyAnswers(t *testing.T) {
	srv := httptest.NewServer(server.New(server.Options{Backend: &drainBackend{}}).Handler())
	defer srv.Close()
	body, err := proto.Marshal(&logdv1.DrainNodeRequest{NodeId: "n2", Undo: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range []string{"application/proto", "application/json"} {
		b := body
		if ct == "application/json" {
			b = []byte(`{"nodeId":"n2","undo":true}`)
		}
		req, err := http.NewRequest(http.MethodPost, srv.URL+logdv1connect.LogServiceDrainNodeProcedure, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set(server.ForwardedHeader, "n3")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get(server.AppliedIndexHeader); resp.StatusCode != http.StatusOK || got != "77" {
			t.Errorf("%s: status %d, %s = %q, want 200 and 77", ct, resp.StatusCode, server.AppliedIndexHeader, got)
		}
	}
}
