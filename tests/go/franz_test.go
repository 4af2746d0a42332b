package gocompat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func franzAdmin(t *testing.T) (*kadm.Client, func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(t)...))
	if err != nil {
		t.Fatal(err)
	}
	return kadm.NewClient(cl), cl.Close
}

func createTopic(t *testing.T, adm *kadm.Client, prefix string, partitions int32) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := unique(prefix)
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	return topic
}

// franz-go's producer is idempotent with acks=all by default; every codec it offers
// round-trips, and a group of two consumers reads everything once and commits it.
func TestFranzGoProducesEveryCodecAndAGroupConsumesAndCommits(t *testing.T) {
	adm, closeAdm := franzAdmin(t)
	defer closeAdm()
	topic := createTopic(t, adm, "franz", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(),
		kgo.Lz4Compression(), kgo.ZstdCompression()}
	const perCodec = 200
	for c, codec := range codecs {
		p, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(t)...), kgo.DefaultProduceTopic(topic),
			kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		records := make([]*kgo.Record, perCodec)
		for i := range records {
			n := c*perCodec + i
			records[i] = &kgo.Record{Key: []byte(fmt.Sprintf("k%d", n)), Value: []byte(fmt.Sprintf("v%d", n)),
				Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(fmt.Sprint(n))}}}
		}
		if err := p.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatalf("produce with codec %d: %v", c, err)
		}
		p.Close()
	}
	total := perCodec * len(codecs)

	group := unique("franz-group")
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	consumers := make([]*kgo.Client, 2)
	for i := range consumers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(t)...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		if err != nil {
			t.Fatal(err)
		}
		consumers[i] = cl
	}
	done := make(chan struct{})
	for _, cl := range consumers {
		wg.Add(1)
		go func(cl *kgo.Client) {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				fetches := cl.PollFetches(pctx)
				pcancel()
				fetches.EachRecord(func(r *kgo.Record) {
					if string(r.Value) != "v"+string(r.Key[1:]) || len(r.Headers) != 1 || string(r.Headers[0].Value) != string(r.Key[1:]) {
						t.Errorf("record %q=%q headers %v", r.Key, r.Value, r.Headers)
					}
					mu.Lock()
					seen[string(r.Key)]++
					mu.Unlock()
				})
				if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
					t.Logf("commit: %v", err)
				}
			}
		}(cl)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d keys", n, total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	for _, cl := range consumers {
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("final commit: %v", err)
		}
		cl.Close()
	}
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offsets.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != int64(total) {
		t.Fatalf("committed offsets sum to %d, want %d", committed, total)
	}
}

// kadm, the admin client of franz-go: topics, configs, partitions, records, offsets, groups.
func TestKadmManagesTopicsConfigsRecordsAndGroups(t *testing.T) {
	adm, closeAdm := franzAdmin(t)
	defer closeAdm()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := createTopic(t, adm, "kadm", 2)

	topics, err := adm.ListTopics(ctx, topic)
	if err != nil || !topics.Has(topic) || len(topics[topic].Partitions) != 2 {
		t.Fatalf("list: %v %v", err, topics)
	}
	retention := "3600000"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &retention}}, topic); err != nil {
		t.Fatal(err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			found = c.MaybeValue() == retention
		}
	}
	if !found {
		t.Fatalf("retention.ms not %s: %+v", retention, rc.Configs)
	}
	if _, err := adm.UpdatePartitions(ctx, 4, topic); err != nil {
		t.Fatal(err)
	}

	p, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(t)...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if err := p.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(topic, 0); o.Offset != 50 {
		t.Fatalf("end offset %d, want 50", o.Offset)
	}
	if o, ok := ends.Lookup(topic, 3); !ok || o.Offset != 0 {
		t.Fatalf("a new partition's end offset: %+v %v", o, ok)
	}
	del, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: kadm.Offset{Topic: topic, Partition: 0, At: 20}}})
	if err != nil || del.Error() != nil {
		t.Fatalf("delete records: %v %v", err, del.Error())
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Offset != 20 {
		t.Fatalf("start offset %d, want 20", o.Offset)
	}

	group := unique("kadm-group")
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 30, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, group, commit); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := fetched.Lookup(topic, 0); o.At != 30 {
		t.Fatalf("fetched %d, want 30", o.At)
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil || !containsGroup(groups.Groups(), group) {
		t.Fatalf("list groups: %v %v", err, groups.Groups())
	}
	if r, err := adm.DeleteGroup(ctx, group); err != nil || r.Err != nil {
		t.Fatalf("delete group: %v %v", err, r.Err)
	}
	if r, err := adm.DeleteTopic(ctx, topic); err != nil || r.Err != nil {
		t.Fatalf("delete topic: %v %v", err, r.Err)
	}
}

func containsGroup(groups []string, g string) bool {
	for _, x := range groups {
		if x == g {
			return true
		}
	}
	return false
}
