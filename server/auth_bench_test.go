package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/server"
)

// BenchmarkProduceAuth produces 100 records of 128 bytes per call to a
// single-node server with authentication off (--auth none) and on (a
// token, checked against an ACL set of a hundred entries). One op is one
// call: authorization costs per call, not per record, so allocs/op differ
// by a constant.
func BenchmarkProduceAuth(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			e := newAuthEnv(b, ctx, envConfig{mod: func(o *server.Options) { o.Auth.Required = mode == "on" }})
			var acls []auth.ACL
			for i := range 99 {
				acls = append(acls, allow("User:other", auth.ResourceTopic, auth.PatternLiteral, "t"+string(rune('a'+i%26))+string(rune('a'+i/26)), auth.OpWrite))
			}
			acls = append(acls, allow("User:bench", auth.ResourceTopic, auth.PatternPrefix, "bench", auth.OpWrite))
			c := e.client(e.user(ctx, "bench", acls...))
			if _, err := e.client(e.admin).CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "bench", Partitions: 1})); err != nil {
				b.Fatal(err)
			}
			recs := make([]*logdv1.Record, 100)
			for i := range recs {
				recs[i] = &logdv1.Record{Value: make([]byte, 128)}
			}
			req := connect.NewRequest(&logdv1.ProduceRequest{Topic: "bench", Records: recs})
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Produce(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
