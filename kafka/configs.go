package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/logd-dev/logd/backend"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic settings as Kafka's DescribeConfigs and IncrementalAlterConfigs see
// them: logd's topic settings carry Kafka's names (retention.ms,
// retention.bytes, cleanup.policy, segment.bytes, max.message.bytes, ...)
// plus logd's own (idempotency.*, queue.*), which a Kafka tool shows and
// sets like any other. There are no dynamic broker settings.

// cleanupPolicy is the one list-valued setting (APPEND and SUBTRACT).
const cleanupPolicy = "cleanup.policy"

// configSource is DEFAULT_CONFIG for a setting at its default value, else
// DYNAMIC_TOPIC_CONFIG.
func configSource(key, value string, defaults map[string]string) kmsg.ConfigSource {
	if d, ok := defaults[key]; ok && d == value {
		return kmsg.ConfigSourceDefaultConfig
	}
	return kmsg.ConfigSourceDynamicTopicConfig
}

// configType is a setting's type as DescribeConfigs gives it.
func configType(key string) kmsg.ConfigType {
	switch key {
	case cleanupPolicy:
		return kmsg.ConfigTypeList
	case "min.cleanable.dirty.ratio":
		return kmsg.ConfigTypeDouble
	case "max.message.bytes":
		return kmsg.ConfigTypeInt
	}
	return kmsg.ConfigTypeLong
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describeConfigs answers DescribeConfigs from this node's state (any node
// answers): a topic's settings with their values and whether each is at
// its default; a broker has none to show. A topic the principal may not
// describe is TOPIC_AUTHORIZATION_FAILED; a broker, without describe on
// the cluster, CLUSTER_AUTHORIZATION_FAILED.
func (s *Server) describeConfigs(ctx context.Context, rc *reqCtx, req *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	s.waitReady(ctx)
	defaults := s.b.TopicConfigDefaults()
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if !rc.mayTopic(r.ResourceName) {
				rr.ErrorCode = errTopicAuthorizationFailed
				break
			}
			t, err := s.b.Topic(r.ResourceName)
			if err != nil {
				rr.ErrorCode = codeFor(err, opAdmin)
				msg := errorMessage(err)
				rr.ErrorMessage = &msg
				break
			}
			for _, k := range sortedKeys(t.Config) {
				if r.ConfigNames != nil && !slices.Contains(r.ConfigNames, k) {
					continue
				}
				rr.Configs = append(rr.Configs, describeConfig(req, k, t.Config[k], defaults))
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			// A share group's settings (share_configs.go).
			if !rc.mayGroup(r.ResourceName) {
				rr.ErrorCode = errGroupAuthorizationFailed
				break
			}
			s.describeShareGroupConfig(r, &rr)
		case kmsg.ConfigResourceTypeBroker:
			// No broker settings are exposed: an empty list.
			if !rc.mayCluster() {
				rr.ErrorCode = errClusterAuthorizationFailed
			}
		default:
			rr.ErrorCode = errInvalidRequest
			msg := fmt.Sprintf("logd describes topic configs only, not %s", r.ResourceType)
			rr.ErrorMessage = &msg
		}
		rc.note(rr.ErrorCode)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

func describeConfig(req *kmsg.DescribeConfigsRequest, key, value string, defaults map[string]string) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = key
	v := value
	c.Value = &v
	c.Source = configSource(key, value, defaults)
	c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
	c.ConfigType = configType(key)
	if req.IncludeSynonyms {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		syn.Name, syn.Value, syn.Source = key, &v, c.Source
		c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
		if c.Source != kmsg.ConfigSourceDefaultConfig {
			if d, ok := defaults[key]; ok {
				def := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				dv := d
				def.Name, def.Value, def.Source = key, &dv, kmsg.ConfigSourceDefaultConfig
				c.ConfigSynonyms = append(c.ConfigSynonyms, def)
			}
		}
	}
	return c
}

// incrementalAlterConfigs answers IncrementalAlterConfigs for topics on the
// leader, and on another node through it (forward.go; NOT_CONTROLLER
// without a Forwarder), and for share groups' GROUP resources likewise
// (share_configs.go, through the share calls): SET and DELETE (back to
// the default) for any setting, APPEND and SUBTRACT for cleanup.policy.
// A resource's changes are applied together or not at all. A topic the
// principal may not alter is TOPIC_AUTHORIZATION_FAILED; a broker,
// without alter on the cluster, CLUSTER_AUTHORIZATION_FAILED. Every
// resource's outcome has a line in the audit log, unless the request
// only validates.
func (s *Server) incrementalAlterConfigs(ctx context.Context, rc *reqCtx, req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	w := rc.writer(s.waitReady(ctx) && s.b.IsLeader())
	actx, cancel := adminContext(ctx, 0)
	defer cancel()
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		rr.ErrorCode, rr.ErrorMessage = s.alterResource(actx, rc, w, r, req.ValidateOnly)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// alterResource authorizes and applies through w (or validates, here) one
// resource's changes, notes its code and writes its audit line; it
// returns the code and the message, if any. A nil w (not the leader,
// nothing to forward through) is NOT_CONTROLLER for a topic; a GROUP
// resource does not go through w (alterShareGroupConfig).
func (s *Server) alterResource(ctx context.Context, rc *reqCtx, w topicWriter, r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (int16, *string) {
	var code int16
	var msg string
	switch {
	case r.ResourceType == kmsg.ConfigResourceTypeTopic && !rc.mayTopic(r.ResourceName):
		code = errTopicAuthorizationFailed
	case r.ResourceType == kmsg.ConfigResourceTypeBroker && !rc.mayCluster():
		code = errClusterAuthorizationFailed
	case r.ResourceType == kmsg.ConfigResourceTypeGroupConfig && !rc.mayGroup(r.ResourceName):
		code = errGroupAuthorizationFailed
	case r.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
		code, msg = s.alterShareGroupConfig(ctx, rc, r, validateOnly)
	case r.ResourceType != kmsg.ConfigResourceTypeTopic:
		code, msg = errInvalidRequest, fmt.Sprintf("logd alters topic configs only, not %s", r.ResourceType)
	case w == nil && !validateOnly:
		code = errNotController
	default:
		code, msg = s.alterTopicConfig(ctx, w, r, validateOnly)
	}
	rc.note(code)
	if !validateOnly {
		rc.audit([]slog.Attr{slog.String("resource", r.ResourceType.String()), slog.String("name", r.ResourceName), alterationsAttr(r.Configs)}, code, msg)
	}
	if msg == "" {
		return code, nil
	}
	return code, &msg
}

// alterationsAttr lists a resource's changes for the audit log.
func alterationsAttr(cfgs []kmsg.IncrementalAlterConfigsRequestResourceConfig) slog.Attr {
	out := make([]string, 0, len(cfgs))
	for _, c := range cfgs {
		v := ""
		if c.Value != nil {
			v = "=" + *c.Value
		}
		out = append(out, c.Op.String()+" "+c.Name+v)
	}
	return slog.Any("configs", out)
}

// alterTopicConfig applies (or validates) one topic's changes.
func (s *Server) alterTopicConfig(ctx context.Context, w topicWriter, r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (int16, string) {
	t, err := s.b.Topic(r.ResourceName)
	if err != nil {
		return codeFor(err, opAdmin), errorMessage(err)
	}
	c := backend.AlterTopic{Name: t.Name, Config: map[string]string{}}
	seen := map[string]bool{}
	for _, kv := range r.Configs {
		if seen[kv.Name] {
			return errInvalidRequest, fmt.Sprintf("%s named more than once", kv.Name)
		}
		seen[kv.Name] = true
		switch kv.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if kv.Value == nil {
				return errInvalidConfig, fmt.Sprintf("%s: SET needs a value", kv.Name)
			}
			c.Config[kv.Name] = *kv.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			c.Delete = append(c.Delete, kv.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if kv.Name != cleanupPolicy {
				return errInvalidConfig, fmt.Sprintf("%s is not a list: APPEND and SUBTRACT apply to %s only", kv.Name, cleanupPolicy)
			}
			v, err := editList(t.Config[cleanupPolicy], kv)
			if err != nil {
				return errInvalidConfig, errorMessage(err)
			}
			c.Config[kv.Name] = v
		default:
			return errInvalidRequest, fmt.Sprintf("%s: unknown operation %d", kv.Name, kv.Op)
		}
	}
	if len(c.Config) == 0 && len(c.Delete) == 0 {
		return errNone, ""
	}
	if err := s.b.ValidateAlterTopic(c); err != nil {
		return codeFor(err, opAdmin), errorMessage(err) // here too when forwarding: the precise code
	}
	if validateOnly {
		return errNone, ""
	}
	if _, err := w.AlterTopic(ctx, c); err != nil {
		return codeFor(err, opAdmin), errorMessage(err)
	}
	s.logger.Info("kafka: topic configs altered", "topic", t.Name, "set", c.Config, "deleted", c.Delete)
	return errNone, ""
}

// editList appends to or subtracts from cleanup.policy's list of values,
// and returns the list in the order logd writes it.
func editList(cur string, kv kmsg.IncrementalAlterConfigsRequestResourceConfig) (string, error) {
	have := map[string]bool{}
	for _, v := range strings.Split(cur, ",") {
		if v = strings.TrimSpace(v); v != "" {
			have[v] = true
		}
	}
	if kv.Value == nil {
		return "", fmt.Errorf("%s: %s needs a value", kv.Name, kv.Op)
	}
	for _, v := range strings.Split(*kv.Value, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		have[v] = kv.Op == kmsg.IncrementalAlterConfigOpAppend
	}
	var out []string
	for _, v := range []string{"compact", "delete"} {
		if have[v] {
			out = append(out, v)
		}
		delete(have, v)
	}
	for v, on := range have {
		if on {
			return "", fmt.Errorf("%s: unknown value %q", kv.Name, v)
		}
	}
	if len(out) == 0 {
		return "", fmt.Errorf("%s would be empty", kv.Name)
	}
	return strings.Join(out, ","), nil
}
