package kafka

import (
	"errors"
	"testing"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// TestGroupErrorTableCoversSentinels: every error of package group maps
// to a Kafka code of its own, not UNKNOWN_SERVER_ERROR.
func TestGroupErrorTableCoversSentinels(t *testing.T) {
	for _, err := range []error{group.ErrConsumerGroupNotFound, group.ErrConsumerGroupNotEmpty, group.ErrUnknownMember,
		group.ErrStaleGeneration, group.ErrNotAssigned, group.ErrOffsetAboveEnd, group.ErrInvalidGroupRequest,
		group.ErrUnknownGroupTopic, group.ErrNoResetPolicy} {
		if code := groupCode(errors.Join(errors.New("context"), err)); code == errUnknownServer || code == errNone {
			t.Errorf("%v: %s", err, errorName(code))
		}
	}
	if code := groupCode(backend.ErrNotLeader); code != errNotCoordinator {
		t.Errorf("not the leader: %s", errorName(code))
	}
	for code, name := range groupErrorNames {
		if errorName(code) != name {
			t.Errorf("%d: %s", code, errorName(code))
		}
	}
}
