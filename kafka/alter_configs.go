package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterConfigs answers AlterConfigs (versions 0 to 2), the request before
// IncrementalAlterConfigs, which kafkajs's admin.alterConfigs and older
// tools send. It has Kafka's replace semantics: the settings a resource
// lists become its settings, and every setting it does not list goes back
// to its default. The rest is IncrementalAlterConfigs' (the same settings,
// forwarded to the leader, all or nothing per resource, the same permissions
// and audit lines): each resource becomes a SET of every setting listed
// and a DELETE of every other.
func (s *Server) alterConfigs(ctx context.Context, rc *reqCtx, req *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	w := rc.writer(s.waitReady(ctx) && s.b.IsLeader())
	actx, cancel := adminContext(ctx, 0)
	defer cancel()
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var current map[string]string
		if r.ResourceType == kmsg.ConfigResourceTypeTopic {
			if info, err := s.b.Topic(r.ResourceName); err == nil {
				current = info.Config // else alterTopicConfig says why
			}
		}
		rr.ErrorCode, rr.ErrorMessage = s.alterResource(actx, rc, w, replaceConfigs(r, current), req.ValidateOnly)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// replaceConfigs turns an AlterConfigs resource into the
// IncrementalAlterConfigs changes with the same outcome: a SET of each
// setting listed with a value, a DELETE (back to the default) of each
// listed without one and of each setting the topic has now (current) not
// listed. (A setting a topic shows only once set, one of a newer feature
// level, is left alone when absent: it is at its default.) A setting
// listed twice stays twice, and is refused as in
// IncrementalAlterConfigs.
func replaceConfigs(r kmsg.AlterConfigsRequestResource, current map[string]string) kmsg.IncrementalAlterConfigsRequestResource {
	out := kmsg.NewIncrementalAlterConfigsRequestResource()
	out.ResourceType, out.ResourceName = r.ResourceType, r.ResourceName
	listed := map[string]bool{}
	for _, c := range r.Configs {
		listed[c.Name] = true
		ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		ic.Name, ic.Value, ic.Op = c.Name, c.Value, kmsg.IncrementalAlterConfigOpSet
		if c.Value == nil {
			ic.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		out.Configs = append(out.Configs, ic)
	}
	if r.ResourceType != kmsg.ConfigResourceTypeTopic {
		return out
	}
	for _, k := range sortedKeys(current) {
		if !listed[k] {
			ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			ic.Name, ic.Op = k, kmsg.IncrementalAlterConfigOpDelete
			out.Configs = append(out.Configs, ic)
		}
	}
	return out
}
