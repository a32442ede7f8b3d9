package clienttest

import (
	"context"
	"maps"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// fakeAlterableConfig is the settings the fake's AlterTopic accepts, with
// their defaults ("" means the setting is absent by default).
var fakeAlterableConfig = map[string]string{
	"max.message.bytes": "",
	"retention.ms":      "604800000",
	"retention.bytes":   "",
	"segment.bytes":     "",
	"cleanup.policy":    "",
}

// AlterTopic implements logdv1connect.LogServiceHandler: it accepts the
// keys of fakeAlterableConfig (any value), refuses others and a key both
// set and deleted, and resets deleted keys to the fake's defaults.
func (f *Fake) AlterTopic(ctx context.Context, req *connect.Request[logdv1.AlterTopicRequest]) (*connect.Response[logdv1.AlterTopicResponse], error) {
	if err := f.enter(ctx, "AlterTopic"); err != nil {
		return nil, err
	}
	m := req.Msg
	if len(m.GetConfig()) == 0 && len(m.GetDeleteConfig()) == 0 {
		return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, "no settings to change")
	}
	for k := range m.GetConfig() {
		if _, ok := fakeAlterableConfig[k]; !ok {
			return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, "unknown topic config %q", k)
		}
	}
	for _, k := range m.GetDeleteConfig() {
		if _, ok := fakeAlterableConfig[k]; !ok {
			return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, "unknown topic config %q", k)
		}
		if _, ok := m.GetConfig()[k]; ok {
			return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, "%q is both set and deleted", k)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[m.GetName()]
	if !ok {
		return nil, unknownTopic(m.GetName())
	}
	cfg := maps.Clone(t.info.GetConfig())
	for _, k := range m.GetDeleteConfig() {
		if def := fakeAlterableConfig[k]; def != "" {
			cfg[k] = def
		} else {
			delete(cfg, k)
		}
	}
	maps.Copy(cfg, m.GetConfig())
	// A new TopicInfo: responses already handed out share the old one.
	t.info = &logdv1.TopicInfo{Name: t.info.GetName(), Partitions: t.info.GetPartitions(), Config: cfg, CreatedMs: t.info.GetCreatedMs()}
	return connect.NewResponse(&logdv1.AlterTopicResponse{Topic: t.info}), nil
}
