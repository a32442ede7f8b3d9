package kafka

import (
	"errors"

	"github.com/logd-dev/logd/group"
)

// Keys of the group requests (docs/kafka.md, "Consumer groups").
const (
	keyOffsetCommit    int16 = 8
	keyOffsetFetch     int16 = 9
	keyFindCoordinator int16 = 10
	keyJoinGroup       int16 = 11
	keyHeartbeat       int16 = 12
	keyLeaveGroup      int16 = 13
	keySyncGroup       int16 = 14
	keyDescribeGroups  int16 = 15
	keyListGroups      int16 = 16
	keyDeleteGroups    int16 = 42
	keyOffsetDelete    int16 = 47
)

// Kafka error codes of the group requests.
const (
	errCoordinatorNotAvailable int16 = 15
	errNotCoordinator          int16 = 16
	errIllegalGeneration       int16 = 22
	errInconsistentGroupProto  int16 = 23
	errInvalidGroupID          int16 = 24
	errUnknownMemberID         int16 = 25
	errInvalidSessionTimeout   int16 = 26
	errRebalanceInProgress     int16 = 27
	errNonEmptyGroup           int16 = 68
	errGroupIDNotFound         int16 = 69
	errMemberIDRequired        int16 = 79
	errGroupMaxSizeReached     int16 = 81
	errFencedInstanceID        int16 = 82
	errGroupSubscribedToTopic  int16 = 86
)

// groupErrorNames names the codes above for metrics and logs (errorName).
var groupErrorNames = map[int16]string{
	errCoordinatorNotAvailable: "COORDINATOR_NOT_AVAILABLE",
	errNotCoordinator:          "NOT_COORDINATOR",
	errIllegalGeneration:       "ILLEGAL_GENERATION",
	errInconsistentGroupProto:  "INCONSISTENT_GROUP_PROTOCOL",
	errInvalidGroupID:          "INVALID_GROUP_ID",
	errUnknownMemberID:         "UNKNOWN_MEMBER_ID",
	errInvalidSessionTimeout:   "INVALID_SESSION_TIMEOUT",
	errRebalanceInProgress:     "REBALANCE_IN_PROGRESS",
	errNonEmptyGroup:           "NON_EMPTY_GROUP",
	errGroupIDNotFound:         "GROUP_ID_NOT_FOUND",
	errMemberIDRequired:        "MEMBER_ID_REQUIRED",
	errGroupMaxSizeReached:     "GROUP_MAX_SIZE_REACHED",
	errFencedInstanceID:        "FENCED_INSTANCE_ID",
	errGroupSubscribedToTopic:  "GROUP_SUBSCRIBED_TO_TOPIC",
}

// groupErrorTable maps the errors of package group, which the backend's
// group calls return, to Kafka codes; groupCode tries it before
// errorTable. group_errors_test.go fails when a sentinel of package group
// has no row.
var groupErrorTable = []errorRow{
	// A reset (or a member of logd's protocol) moved the group's
	// generation since the coordinator formed its own.
	{errs: []error{group.ErrStaleGeneration}, code: errIllegalGeneration},
	// Members of logd's protocol hold the group.
	{errs: []error{group.ErrUnknownMember, group.ErrNotAssigned}, code: errUnknownMemberID},
	{errs: []error{group.ErrConsumerGroupNotFound}, code: errGroupIDNotFound},
	{errs: []error{group.ErrConsumerGroupNotEmpty}, code: errNonEmptyGroup},
	{errs: []error{group.ErrOffsetAboveEnd, group.ErrNoResetPolicy}, code: errOffsetOutOfRange},
	{errs: []error{group.ErrUnknownGroupTopic}, code: errUnknownTopicOrPartition},
	{errs: []error{group.ErrInvalidGroupRequest}, code: errInvalidRequest},
}

// groupCode maps a backend error of a group request to a Kafka code: the
// group rows first, then errorTable, where a node that cannot propose
// (NOT_LEADER_OR_FOLLOWER) is NOT_COORDINATOR, so the client finds the
// coordinator again.
func groupCode(err error) int16 {
	if err == nil {
		return errNone
	}
	for _, row := range groupErrorTable {
		for _, e := range row.errs {
			if errors.Is(err, e) {
				return row.code
			}
		}
	}
	if code := tableCode(err); code != errNotLeaderOrFollower {
		return code
	}
	return errNotCoordinator
}
