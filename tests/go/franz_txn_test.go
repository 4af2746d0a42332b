package gocompat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readAll reads topic from its start with isolation until want records or a quiet
// second after them, and returns the values.
func readAll(t *testing.T, ctx context.Context, topic string, isolation kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(t)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var values []string
	deadline := time.Now().Add(20 * time.Second)
	quiet := time.Time{}
	for time.Now().Before(deadline) {
		if len(values) >= want {
			if quiet.IsZero() {
				quiet = time.Now().Add(time.Second)
			} else if time.Now().After(quiet) {
				break
			}
		}
		pollCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fetches := cl.PollFetches(pollCtx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	return values
}

func transactional(t *testing.T, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(bootstrap(t)...), kgo.TransactionalID(id),
		kgo.TransactionTimeout(60 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// produceInTxn writes n values "prefix-i" in one transaction and ends it with end.
func produceInTxn(t *testing.T, ctx context.Context, cl *kgo.Client, prefix string, n int, end kgo.TransactionEndTry) error {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return cl.EndTransaction(ctx, end)
}

// franz-go's transactions: a commit is read by read_committed consumers and an abort is
// not (read_uncommitted sees both); a second producer of the same transactional id fences
// the first; and a GroupTransactSession copies a topic exactly once with its offsets in
// the transactions, one of them aborted midway and redone.
func TestFranzGoTransactionsCommitAbortFenceAndCopyExactlyOnce(t *testing.T) {
	adm, closeAdm := franzAdmin(t)
	defer closeAdm()
	in := createTopic(t, adm, "franz-txn-in", 3)
	out := createTopic(t, adm, "franz-txn-out", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()

	id := unique("franz-txn")
	p := transactional(t, id, kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err := produceInTxn(t, ctx, p, "committed", 30, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := produceInTxn(t, ctx, p, "aborted", 20, kgo.TryAbort); err != nil {
		t.Fatalf("abort: %v", err)
	}
	committed := readAll(t, ctx, in, kgo.ReadCommitted(), 30)
	if len(committed) != 30 {
		t.Fatalf("read_committed saw %d records, want the 30 committed: %v", len(committed), committed)
	}
	for _, v := range committed {
		if !strings.HasPrefix(v, "committed-") {
			t.Fatalf("read_committed saw %q of the aborted transaction", v)
		}
	}
	if all := readAll(t, ctx, in, kgo.ReadUncommitted(), 50); len(all) != 50 {
		t.Fatalf("read_uncommitted saw %d records, want 50", len(all))
	}

	// A second instance of the same transactional id fences the first: the first one's
	// open transaction cannot commit.
	if err := p.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatalf("zombie's produce: %v", err)
	}
	successor := transactional(t, id, kgo.DefaultProduceTopic(in))
	if err := produceInTxn(t, ctx, successor, "successor", 1, kgo.TryCommit); err != nil {
		t.Fatalf("the successor's commit: %v", err)
	}
	successor.Close()
	err := p.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's commit: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	p.Close()
	for _, v := range readAll(t, ctx, in, kgo.ReadCommitted(), 31) {
		if v == "zombie" {
			t.Fatal("the fenced producer's record is visible to read_committed")
		}
	}

	// Consume-transform-produce: in (read_committed) to out, offsets in the transaction.
	group := unique("franz-txn-group")
	session, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(bootstrap(t)...), kgo.TransactionalID(unique("franz-copier")),
		kgo.TransactionTimeout(60*time.Second), kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic(out))
	if err != nil {
		t.Fatal(err)
	}
	copied, aborted := 0, false
	deadline := time.Now().Add(60 * time.Second)
	for copied < 31 && time.Now().Before(deadline) {
		pollCtx, cancelPoll := context.WithTimeout(ctx, time.Second)
		fetches := session.PollFetches(pollCtx)
		cancelPoll()
		if fetches.NumRecords() == 0 {
			continue
		}
		if err := session.Begin(); err != nil {
			t.Fatalf("session begin: %v", err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			session.Produce(ctx, &kgo.Record{Value: append([]byte("copy-"), r.Value...)}, nil)
		})
		// The first batch is copied, then aborted: its records must be copied again.
		end := kgo.TryCommit
		if !aborted {
			end, aborted = kgo.TryAbort, true
		}
		done, err := session.End(ctx, end)
		if err != nil {
			t.Fatalf("session end: %v", err)
		}
		if done {
			copied += fetches.NumRecords()
		}
	}
	session.Close()
	if copied != 31 {
		t.Fatalf("copied %d records in committed transactions, want 31", copied)
	}
	copies := readAll(t, ctx, out, kgo.ReadCommitted(), 31)
	seen := map[string]int{}
	for _, v := range copies {
		seen[v]++
	}
	if len(copies) != 31 || len(seen) != 31 {
		t.Fatalf("read_committed of the copy: %d records, %d distinct; want 31 once each", len(copies), len(seen))
	}
	// The offsets committed with the copies cover the whole input: the group resumes
	// with nothing left to read.
	rest, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(t)...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer rest.Close()
	left := 0
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); {
		pollCtx, cancelPoll := context.WithTimeout(ctx, 500*time.Millisecond)
		left += rest.PollFetches(pollCtx).NumRecords()
		cancelPoll()
	}
	if left != 0 {
		t.Fatalf("the copier's group resumed with %d records left: its offsets did not commit with its copies", left)
	}
}
