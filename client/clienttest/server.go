package clienttest

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	keypart "github.com/logd-dev/logd/partition"
)

// Fake is an in-memory implementation of logdv1connect.LogServiceHandler.
// Its methods are safe for concurrent use.
type Fake struct {
	logdv1connect.UnimplementedLogServiceHandler

	// now stamps records and topics; fixed at construction.
	now func() time.Time

	mu sync.Mutex
	// Guarded by mu:
	topics     map[string]*topic
	changed    chan struct{} // closed and replaced on every append
	closed     bool
	rr         int32 // round-robin cursor for records without key or partition
	calls      map[string]int
	intercepts map[string][]func(context.Context) error
	status     *logdv1.StatusResponse
	queues     map[string]*queueGroup // by topic and group (queues.go)
}

type topic struct {
	info       *logdv1.TopicInfo
	partitions []*partition
}

type partition struct {
	logStart int64
	records  []*logdv1.FetchedRecord // records[i] has offset logStart+i
}

func (p *partition) end() int64 { return p.logStart + int64(len(p.records)) }

// NewFake returns an empty fake. now stamps records produced without a
// timestamp; nil means time.Now.
func NewFake(now func() time.Time) *Fake {
	if now == nil {
		now = time.Now
	}
	return &Fake{
		now:        now,
		topics:     make(map[string]*topic),
		changed:    make(chan struct{}),
		calls:      make(map[string]int),
		intercepts: make(map[string][]func(context.Context) error),
		status: &logdv1.StatusResponse{
			NodeId: "node-1", State: "Leader", LeaderId: "node-1", LeaderAddress: "127.0.0.1:7070",
			Term: 2, CommitIndex: 10, AppliedIndex: 10, LastLogIndex: 10,
			Members: []*logdv1.Member{{Id: "node-1", RaftAddress: "127.0.0.1:7071", Suffrage: "Voter"}},
		},
	}
}

// Server is a Fake served over HTTP by an httptest server.
type Server struct {
	*Fake
	srv *httptest.Server
}

// Start serves a new fake on a local port and stops it when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	f := NewFake(nil)
	mux := http.NewServeMux()
	mux.Handle(logdv1connect.NewLogServiceHandler(f))
	s := &Server{Fake: f, srv: httptest.NewServer(mux)}
	tb.Cleanup(s.Close)
	return s
}

// URL returns the server's base URL, "http://127.0.0.1:port".
func (s *Server) URL() string { return s.srv.URL }

// Addr returns the server's "127.0.0.1:port".
func (s *Server) Addr() string { return strings.TrimPrefix(s.srv.URL, "http://") }

// Close wakes waiting fetches and stops the server. It is idempotent.
func (s *Server) Close() {
	s.Fake.wakeAll()
	s.srv.Close()
}

// wakeAll ends every long poll, now and later.
func (f *Fake) wakeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.changed)
	}
}

// Calls returns how many times method (e.g. "Produce") was called,
// intercepted calls included.
func (f *Fake) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// Intercept queues fns for the next calls of method, one per call: each
// runs before the call and, if it returns an error, the call fails with it
// without effect. A fn may block (honouring ctx) to simulate a slow server.
func (f *Fake) Intercept(method string, fns ...func(context.Context) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.intercepts[method] = append(f.intercepts[method], fns...)
}

// FailNext makes the next len(errs) calls of method fail with errs in order.
func (f *Fake) FailNext(method string, errs ...error) {
	for _, err := range errs {
		f.Intercept(method, func(context.Context) error { return err })
	}
}

// SetStatus sets the answer of Status.
func (f *Fake) SetStatus(st *logdv1.StatusResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = st
}

// Truncate drops the records of a partition below offset, as retention
// would.
func (f *Fake) Truncate(topicName string, part int32, below int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[topicName]
	if !ok || part < 0 || int(part) >= len(t.partitions) {
		return fmt.Errorf("no partition %s/%d", topicName, part)
	}
	p := t.partitions[part]
	n := min(max(below-p.logStart, 0), int64(len(p.records)))
	p.records = slices.Clone(p.records[n:])
	p.logStart += n
	return nil
}

// enter counts a call and runs its interceptor, if any.
func (f *Fake) enter(ctx context.Context, method string) error {
	f.mu.Lock()
	f.calls[method]++
	var fn func(context.Context) error
	if q := f.intercepts[method]; len(q) > 0 {
		fn, f.intercepts[method] = q[0], q[1:]
	}
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx)
	}
	return nil
}

// Error builds a server error the way logd does: a code, the server's
// message and an ErrorInfo detail.
func Error(code connect.Code, info *logdv1.ErrorInfo, format string, args ...any) *connect.Error {
	ce := connect.NewError(code, fmt.Errorf(format, args...))
	if info != nil {
		if d, err := connect.NewErrorDetail(info); err == nil {
			ce.AddDetail(d)
		}
	}
	return ce
}

func reasonError(code connect.Code, reason logdv1.Reason, format string, args ...any) *connect.Error {
	return Error(code, &logdv1.ErrorInfo{Reason: reason}, format, args...)
}

func unknownTopic(name string) error {
	return reasonError(connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_TOPIC, "topic %q does not exist", name)
}

// CreateTopic implements logdv1connect.LogServiceHandler.
func (f *Fake) CreateTopic(ctx context.Context, req *connect.Request[logdv1.CreateTopicRequest]) (*connect.Response[logdv1.CreateTopicResponse], error) {
	if err := f.enter(ctx, "CreateTopic"); err != nil {
		return nil, err
	}
	m := req.Msg
	if m.GetName() == "" || strings.ContainsAny(m.GetName(), "/ \t\n") {
		return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, "invalid topic name %q", m.GetName())
	}
	if m.GetPartitions() < 1 || m.GetPartitions() > 1024 {
		return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, "partitions must be in [1, 1024], got %d", m.GetPartitions())
	}
	for k := range m.GetConfig() {
		if k != "max.message.bytes" && k != "retention.ms" && k != "segment.bytes" {
			return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, "unknown topic config %q", k)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.topics[m.GetName()]; ok {
		return nil, reasonError(connect.CodeAlreadyExists, logdv1.Reason_REASON_TOPIC_EXISTS, "topic %q already exists", m.GetName())
	}
	cfg := map[string]string{"retention.ms": "604800000"}
	maps.Copy(cfg, m.GetConfig())
	t := &topic{info: &logdv1.TopicInfo{
		Name: m.GetName(), Partitions: m.GetPartitions(), Config: cfg, CreatedMs: f.now().UnixMilli(),
	}}
	for range m.GetPartitions() {
		t.partitions = append(t.partitions, &partition{})
	}
	f.topics[m.GetName()] = t
	return connect.NewResponse(&logdv1.CreateTopicResponse{Topic: t.info}), nil
}

// ListTopics implements logdv1connect.LogServiceHandler.
func (f *Fake) ListTopics(ctx context.Context, _ *connect.Request[logdv1.ListTopicsRequest]) (*connect.Response[logdv1.ListTopicsResponse], error) {
	if err := f.enter(ctx, "ListTopics"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &logdv1.ListTopicsResponse{}
	for _, name := range slices.Sorted(maps.Keys(f.topics)) {
		resp.Topics = append(resp.Topics, f.topics[name].info)
	}
	return connect.NewResponse(resp), nil
}

// DescribeTopic implements logdv1connect.LogServiceHandler.
func (f *Fake) DescribeTopic(ctx context.Context, req *connect.Request[logdv1.DescribeTopicRequest]) (*connect.Response[logdv1.DescribeTopicResponse], error) {
	if err := f.enter(ctx, "DescribeTopic"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[req.Msg.GetName()]
	if !ok {
		return nil, unknownTopic(req.Msg.GetName())
	}
	resp := &logdv1.DescribeTopicResponse{Topic: t.info}
	for i, p := range t.partitions {
		var size int64
		for _, r := range p.records {
			size += int64(len(r.GetKey()) + len(r.GetValue()))
		}
		resp.Partitions = append(resp.Partitions, &logdv1.PartitionInfo{
			Partition: int32(i), LogStartOffset: p.logStart, EndOffset: p.end(), Bytes: size, Segments: 1,
		})
	}
	return connect.NewResponse(resp), nil
}

// DeleteTopic implements logdv1connect.LogServiceHandler.
func (f *Fake) DeleteTopic(ctx context.Context, req *connect.Request[logdv1.DeleteTopicRequest]) (*connect.Response[logdv1.DeleteTopicResponse], error) {
	if err := f.enter(ctx, "DeleteTopic"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.topics[req.Msg.GetName()]; !ok {
		return nil, unknownTopic(req.Msg.GetName())
	}
	delete(f.topics, req.Msg.GetName())
	return connect.NewResponse(&logdv1.DeleteTopicResponse{}), nil
}

// Produce implements logdv1connect.LogServiceHandler. A call is all or
// nothing: every record is checked before any is appended.
func (f *Fake) Produce(ctx context.Context, req *connect.Request[logdv1.ProduceRequest]) (*connect.Response[logdv1.ProduceResponse], error) {
	if err := f.enter(ctx, "Produce"); err != nil {
		return nil, err
	}
	m := req.Msg
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[m.GetTopic()]
	if !ok {
		return nil, unknownTopic(m.GetTopic())
	}
	if len(m.GetRecords()) == 0 {
		return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, "no records")
	}
	limit := 1 << 20
	if v, ok := t.info.GetConfig()["max.message.bytes"]; ok {
		fmt.Sscan(v, &limit)
	}
	n := t.info.GetPartitions()
	targets := make([]int32, len(m.GetRecords()))
	rr := f.rr
	for i, r := range m.GetRecords() {
		if size := len(r.GetKey()) + len(r.GetValue()); size > limit {
			return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_RECORD_TOO_LARGE, "record %d is %d bytes, above max.message.bytes %d", i, size, limit)
		}
		switch {
		case r.Partition != nil:
			if r.GetPartition() < 0 || r.GetPartition() >= n {
				return nil, reasonError(connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_PARTITION, "topic %q has no partition %d", m.GetTopic(), r.GetPartition())
			}
			targets[i] = r.GetPartition()
		case r.Key != nil:
			targets[i] = keypart.ForKey(r.GetKey(), n)
		default:
			targets[i] = rr % n
			rr++
		}
	}
	f.rr = rr
	now := f.now().UnixMilli()
	resp := &logdv1.ProduceResponse{}
	for i, r := range m.GetRecords() {
		p := t.partitions[targets[i]]
		ts := r.GetTimestampMs()
		if ts == 0 {
			ts = now
		}
		off := p.end()
		p.records = append(p.records, &logdv1.FetchedRecord{
			Offset: off, TimestampMs: ts, Key: r.Key, Value: r.Value, Headers: r.GetHeaders(),
		})
		resp.Results = append(resp.Results, &logdv1.RecordResult{Partition: targets[i], Offset: off})
	}
	if !f.closed {
		close(f.changed)
		f.changed = make(chan struct{})
	}
	return connect.NewResponse(resp), nil
}

// Fetch implements logdv1connect.LogServiceHandler, long polls included.
func (f *Fake) Fetch(ctx context.Context, req *connect.Request[logdv1.FetchRequest]) (*connect.Response[logdv1.FetchResponse], error) {
	if err := f.enter(ctx, "Fetch"); err != nil {
		return nil, err
	}
	resp, err := f.longPoll(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// longPoll reads m until records arrive or m's MaxWaitMs passes.
func (f *Fake) longPoll(ctx context.Context, m *logdv1.FetchRequest) (*logdv1.FetchResponse, error) {
	var deadline <-chan time.Time
	if m.GetMaxWaitMs() > 0 {
		t := time.NewTimer(time.Duration(m.GetMaxWaitMs()) * time.Millisecond)
		defer t.Stop()
		deadline = t.C
	}
	for {
		resp, wait, err := f.read(m)
		if err != nil {
			return nil, err
		}
		if len(resp.GetRecords()) > 0 || deadline == nil || wait == nil {
			return resp, nil
		}
		select {
		case <-wait:
		case <-deadline:
			deadline = nil // one last read, then answer
		case <-ctx.Done():
			return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
		}
	}
}

// read answers a fetch from the current state; wait is closed on the next
// append, and nil once the server is closing.
func (f *Fake) read(m *logdv1.FetchRequest) (*logdv1.FetchResponse, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[m.GetTopic()]
	if !ok {
		return nil, nil, unknownTopic(m.GetTopic())
	}
	if m.GetPartition() < 0 || int(m.GetPartition()) >= len(t.partitions) {
		return nil, nil, reasonError(connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_PARTITION, "topic %q has no partition %d", m.GetTopic(), m.GetPartition())
	}
	p := t.partitions[m.GetPartition()]
	if m.GetOffset() < p.logStart || m.GetOffset() > p.end() {
		return nil, nil, Error(connect.CodeOutOfRange,
			&logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE, LogStartOffset: p.logStart, EndOffset: p.end()},
			"offset %d is out of range [%d, %d]", m.GetOffset(), p.logStart, p.end())
	}
	maxBytes := int(m.GetMaxBytes())
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	resp := &logdv1.FetchResponse{LogStartOffset: p.logStart, EndOffset: p.end(), NextOffset: m.GetOffset()}
	size := 0
	for _, r := range p.records[m.GetOffset()-p.logStart:] {
		if len(resp.Records) > 0 && size+len(r.GetKey())+len(r.GetValue()) > maxBytes {
			break
		}
		if m.GetMaxRecords() > 0 && len(resp.Records) >= int(m.GetMaxRecords()) {
			break
		}
		resp.Records = append(resp.Records, r)
		size += len(r.GetKey()) + len(r.GetValue())
		resp.NextOffset = r.GetOffset() + 1
	}
	if f.closed {
		return resp, nil, nil
	}
	return resp, f.changed, nil
}

// Status implements logdv1connect.LogServiceHandler.
func (f *Fake) Status(ctx context.Context, _ *connect.Request[logdv1.StatusRequest]) (*connect.Response[logdv1.StatusResponse], error) {
	if err := f.enter(ctx, "Status"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return connect.NewResponse(f.status), nil
}

// ListOffsets implements logdv1connect.LogServiceHandler: the bounds, and
// for a timestamp the first record at or after it.
func (f *Fake) ListOffsets(ctx context.Context, req *connect.Request[logdv1.ListOffsetsRequest]) (*connect.Response[logdv1.ListOffsetsResponse], error) {
	if err := f.enter(ctx, "ListOffsets"); err != nil {
		return nil, err
	}
	m := req.Msg
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[m.GetTopic()]
	if !ok {
		return nil, unknownTopic(m.GetTopic())
	}
	if m.GetPartition() < 0 || int(m.GetPartition()) >= len(t.partitions) {
		return nil, reasonError(connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_PARTITION, "topic %q has no partition %d", m.GetTopic(), m.GetPartition())
	}
	p := t.partitions[m.GetPartition()]
	resp := &logdv1.ListOffsetsResponse{LogStartOffset: p.logStart, EndOffset: p.end()}
	if m.TimestampMs != nil {
		resp.Offset = p.end()
		for _, r := range p.records {
			if r.GetTimestampMs() >= m.GetTimestampMs() {
				resp.Offset = r.GetOffset()
				break
			}
		}
	}
	return connect.NewResponse(resp), nil
}
