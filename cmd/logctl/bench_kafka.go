package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The --kafka variants of bench produce and bench consume drive the same
// node through its Kafka listener with franz-go (kgo), the client Kafka
// users run, so the two front ends can be compared in one sitting. The
// topic is still created, described and deleted over logd's own API.

// kafkaBenchOpts are the kgo options common to producing and consuming:
// the seed broker and, when logctl's TLS settings switch TLS on, the same
// CA and client certificate (the bench authenticates to the Kafka
// listener with a client certificate, never SASL).
func (o *globalOpts) kafkaBenchOpts(addr string) ([]kgo.Opt, error) {
	kopts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("logctl-bench")}
	conf, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	if conf != nil {
		conf.NextProtos = nil // the Kafka protocol, not HTTP/2
		kopts = append(kopts, kgo.DialTLSConfig(conf))
	}
	return kopts, nil
}

// benchProduceKafka produces like benchProduce, through the Kafka
// listener: up to concurrency × records-per-call records are buffered in
// kgo, which batches them per partition (acks=all, uncompressed as logd's
// API sends them, idempotent as kgo is by default, so every batch goes
// through its partition's producer state where the cluster serves
// InitProducerId, unless --kafka-idempotent=false). Latency is per record, from the Produce call to its
// acknowledgement.
func benchProduceKafka(ctx context.Context, o *globalOpts, addr string, f *benchProduceFlags, prog *progress) (benchResult, error) {
	if f.rate > 0 || f.idemKeys || f.compareRounds > 0 {
		return benchResult{}, usagef("--kafka measures the Kafka path as fast as it goes: not with --rate, --idempotency-keys or --compare-keys")
	}
	kopts, err := o.kafkaBenchOpts(addr)
	if err != nil {
		return benchResult{}, err
	}
	buffered := f.concurrency * f.recordsPerCall
	kopts = append(kopts,
		kgo.DefaultProduceTopic(f.topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// kgo compresses with snappy by default, and every record here
		// carries the same value: batches would shrink to almost nothing
		// and measure the codec, not the path logd's API takes.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(buffered),
		// kgo's default batch bound (about 1 MB) stays under the topic's
		// default max.message.bytes.
	)
	if !f.kafkaIdempotent {
		kopts = append(kopts, kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return benchResult{}, fmt.Errorf("kafka client for %s: %w", addr, err)
	}
	defer cl.Close()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f.duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	value := make([]byte, f.recordSize)
	rand.Read(value)
	var (
		produced atomic.Int64
		mu       sync.Mutex
		lats     = make([]time.Duration, 0, min(f.records, 1<<22))
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for i := int64(0); (f.records == 0 || i < f.records) && runCtx.Err() == nil; i++ {
		began := time.Now()
		wg.Add(1)
		// The record is not reused: kgo owns it until the promise runs.
		cl.Produce(runCtx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			lat := time.Since(began)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if runCtx.Err() != nil && ctx.Err() == nil {
					return // the duration ended while the record was buffered
				}
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			lats = append(lats, lat)
			produced.Add(1)
			prog.Add(1, 1, int64(f.recordSize))
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return benchResult{}, fmt.Errorf("produce over Kafka to %s: %w", f.topic, firstErr)
	}
	if err := ctx.Err(); err != nil {
		return benchResult{}, fmt.Errorf("interrupted after %d records: %w", produced.Load(), err)
	}
	n := produced.Load()
	return benchResult{Records: n, Bytes: n * int64(f.recordSize), Elapsed: elapsed, Latency: summarize(lats)}, nil
}

// benchConsumeKafka reads the offset ranges of tasks through the Kafka
// listener with one kgo client, which fetches from every partition at
// once (--concurrency does not apply: kgo keeps one fetch per broker in
// flight). Latency is per poll: how long PollFetches waited for data.
func benchConsumeKafka(ctx context.Context, o *globalOpts, addr string, f *benchConsumeFlags, tasks []offsetRange, prog *progress) (benchResult, error) {
	kopts, err := o.kafkaBenchOpts(addr)
	if err != nil {
		return benchResult{}, err
	}
	// Ranges of one partition are contiguous: read it from the lowest
	// range's start to the highest range's end.
	froms := make(map[int32]int64)
	ends := make(map[int32]int64)
	var want int64
	for _, t := range tasks {
		if t.to <= t.from {
			continue
		}
		if from, ok := froms[t.partition]; !ok || t.from < from {
			froms[t.partition] = t.from
		}
		ends[t.partition] = max(ends[t.partition], t.to)
		want += t.to - t.from
	}
	starts := make(map[int32]kgo.Offset, len(froms))
	for p, from := range froms {
		starts[p] = kgo.NewOffset().At(from)
	}
	if f.records > 0 {
		want = min(want, f.records)
	}
	kopts = append(kopts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{f.topic: starts}))
	if f.maxBytes > 0 {
		kopts = append(kopts, kgo.FetchMaxBytes(f.maxBytes), kgo.FetchMaxPartitionBytes(f.maxBytes))
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return benchResult{}, fmt.Errorf("kafka client for %s: %w", addr, err)
	}
	defer cl.Close()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f.duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	var (
		records, bytes int64
		lats           []time.Duration
	)
	start := time.Now()
	for records < want {
		began := time.Now()
		fetches := cl.PollFetches(runCtx)
		if runCtx.Err() != nil {
			if ctx.Err() != nil {
				return benchResult{}, fmt.Errorf("interrupted after %d records: %w", records, ctx.Err())
			}
			break // --duration ended the run
		}
		lats = append(lats, time.Since(began))
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("fetch %s/%d over Kafka: %w", topic, p, err)
			}
		})
		if ferr != nil {
			return benchResult{}, ferr
		}
		var n, size int64
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] || records+n >= want {
				return
			}
			n++
			size += int64(len(r.Key) + len(r.Value))
		})
		records += n
		bytes += size
		prog.Add(n, n, size)
	}
	return benchResult{Records: records, Bytes: bytes, Elapsed: time.Since(start), Latency: summarize(lats)}, nil
}
