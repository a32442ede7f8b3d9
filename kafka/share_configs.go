package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// The GROUP-resource settings of share groups, Kafka 4.2's names
// (backend.ShareAutoOffsetReset, ...), are replicated in the meta group
// (backend.ShareGroupConfig; docs/kafka.md, "Share groups"): any node
// answers DescribeConfigs from its replica, and the coordinator reads
// them where a heartbeat creates queue groups, whichever node leads. The
// meta leader changes them; another node checks the principal's right and
// the change, then hands the resource to the leader over the share calls
// (share_forward.go), where both are checked again, and answers what the
// leader decided once it applied the change itself.

// shareConfigKeys lists the settings in DescribeConfigs' order.
var shareConfigKeys = []string{backend.ShareAutoOffsetReset, backend.ShareDeliveryCountLimit, backend.ShareRecordLockDurationMs}

// values is cfg as DescribeConfigs shows it, and whether each is a
// default.
func (c *shareCoordinator) values(cfg backend.ShareGroupConfig) map[string][2]string {
	reset := cmp.Or(cfg.AutoOffsetReset, "latest")
	lock := cmp.Or(cfg.RecordLockDuration, c.opts.lockDuration)
	limit := cmp.Or(cfg.DeliveryCountLimit, queue.DefaultMaxDeliveries)
	def := func(b bool) string { return strconv.FormatBool(b) }
	return map[string][2]string{
		backend.ShareAutoOffsetReset:      {reset, def(cfg.AutoOffsetReset == "")},
		backend.ShareRecordLockDurationMs: {strconv.FormatInt(lock.Milliseconds(), 10), def(cfg.RecordLockDuration == 0)},
		backend.ShareDeliveryCountLimit:   {strconv.Itoa(limit), def(cfg.DeliveryCountLimit == 0)},
	}
}

// config returns a group's settings as this node applied them.
func (c *shareCoordinator) config(group string) backend.ShareGroupConfig {
	return c.s.b.ShareGroupConfig(group)
}

// lockFor is the acquisition lock this node knows for a group: its
// setting here, else the node's default. Deliveries are leased for their
// queue group's lease, where a setting is written and which a queue group
// a heartbeat creates gets from this; an answer without records names
// this.
func (c *shareCoordinator) lockFor(group string) time.Duration {
	return cmp.Or(c.config(group).RecordLockDuration, c.opts.lockDuration)
}

// shareConfigChange reads a GROUP resource's changes of
// IncrementalAlterConfigs: SET and DELETE; a code and a message for
// anything else, or for a setting named twice. The settings and values
// are checked by the backend.
func shareConfigChange(r kmsg.IncrementalAlterConfigsRequestResource) (backend.AlterShareGroupConfig, int16, string) {
	c := backend.AlterShareGroupConfig{Group: r.ResourceName, Set: map[string]string{}}
	seen := map[string]bool{}
	for _, kv := range r.Configs {
		if seen[kv.Name] {
			return c, errInvalidRequest, fmt.Sprintf("%s named more than once", kv.Name)
		}
		seen[kv.Name] = true
		switch {
		case kv.Op == kmsg.IncrementalAlterConfigOpDelete:
			c.Delete = append(c.Delete, kv.Name)
		case kv.Op == kmsg.IncrementalAlterConfigOpSet && kv.Value != nil:
			c.Set[kv.Name] = *kv.Value
		default:
			return c, errInvalidConfig, fmt.Sprintf("%s: SET with a value, or DELETE", kv.Name)
		}
	}
	return c, errNone, ""
}

// alterShareGroupConfig applies (or validates) a GROUP resource's changes
// of IncrementalAlterConfigs: on the leader through the backend, where
// the settings are replicated; the delivery limit and lock are then
// written to the group's existing queue groups (max deliveries and
// lease); elsewhere through the leader (forwardShareConfig). Below the
// settings' feature level a change is refused (POLICY_VIOLATION).
func (s *Server) alterShareGroupConfig(ctx context.Context, rc *reqCtx, r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (int16, string) {
	c, code, msg := shareConfigChange(r)
	if code != errNone {
		return code, msg
	}
	if err := s.b.ValidateShareGroupConfig(c); err != nil {
		return codeFor(err, opAdmin), errorMessage(err)
	}
	if validateOnly || len(c.Set)+len(c.Delete) == 0 {
		return errNone, ""
	}
	if !s.share.lead(ctx) {
		return s.forwardShareConfig(ctx, rc, r)
	}
	cfg, err := s.b.AlterShareGroupConfig(ctx, c)
	if err != nil {
		return codeFor(err, opAdmin), errorMessage(err)
	}
	touched := func(name string) bool { _, set := c.Set[name]; return set || slices.Contains(c.Delete, name) }
	limit, lock := touched(backend.ShareDeliveryCountLimit), touched(backend.ShareRecordLockDurationMs)
	if !limit && !lock {
		return errNone, ""
	}
	for _, t := range s.b.Topics() {
		if !slices.Contains(s.b.QueueGroups(t.Name), r.ResourceName) {
			continue
		}
		_, err := s.b.AlterQueueGroup(ctx, t.Name, r.ResourceName, func(q *queue.Config) {
			if limit {
				q.MaxDeliveries = cmp.Or(cfg.DeliveryCountLimit, queue.DefaultMaxDeliveries)
			}
			if lock {
				q.Lease = cmp.Or(cfg.RecordLockDuration, s.share.opts.lockDuration)
			}
		})
		if err != nil && !errors.Is(err, queue.ErrGroupNotFound) {
			return codeFor(err, opAdmin), errorMessage(err)
		}
	}
	return errNone, ""
}

// describeShareGroupConfig lists a GROUP resource's settings, as this
// node applied them.
func (s *Server) describeShareGroupConfig(r kmsg.DescribeConfigsRequestResource, rr *kmsg.DescribeConfigsResponseResource) {
	vals := s.share.values(s.share.config(r.ResourceName))
	for _, k := range shareConfigKeys {
		if r.ConfigNames != nil && !slices.Contains(r.ConfigNames, k) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = k
		v := vals[k][0]
		c.Value = &v
		c.IsDefault = vals[k][1] == "true"
		c.Source = kmsg.ConfigSourceGroupConfig
		if c.IsDefault {
			c.Source = kmsg.ConfigSourceDefaultConfig
		}
		c.ConfigType = kmsg.ConfigTypeInt
		if k == backend.ShareAutoOffsetReset {
			c.ConfigType = kmsg.ConfigTypeString
		}
		rr.Configs = append(rr.Configs, c)
	}
}
