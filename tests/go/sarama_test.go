package gocompat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// handler counts what a sarama group member reads and marks it for commit.
type handler struct {
	mu   sync.Mutex
	seen map[string]int
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.seen[string(m.Key)]++
		h.mu.Unlock()
		s.MarkMessage(m, "")
	}
	return nil
}

func (h *handler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

// Sarama with its default settings (only what a sync producer and a group require
// changed): the admin creates a topic, a sync producer writes, a group reads it all
// and commits.
func TestSaramaWithDefaultSettingsProducesConsumesAndAdministers(t *testing.T) {
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	adm, err := sarama.NewClusterAdmin(bootstrap(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	topic := unique("sarama")
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	meta, err := adm.DescribeTopics([]string{topic})
	if err != nil || len(meta) != 1 || len(meta[0].Partitions) != 3 {
		t.Fatalf("describe: %v %+v", err, meta)
	}

	producer, err := sarama.NewSyncProducer(bootstrap(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	const total = 600
	for i := 0; i < total; i++ {
		_, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	producer.Close()

	group := unique("sarama-group")
	cg, err := sarama.NewConsumerGroup(bootstrap(t), group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &handler{seen: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	deadline := time.Now().Add(90 * time.Second)
	for h.count() < total {
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d keys", h.count(), total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := cg.Close(); err != nil {
		t.Fatal(err)
	}
	offsets, err := adm.ListConsumerGroupOffsets(group, nil)
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	for _, parts := range offsets.Blocks {
		for _, b := range parts {
			committed += b.Offset
		}
	}
	if committed != total {
		t.Fatalf("committed offsets sum to %d, want %d", committed, total)
	}
	if err := adm.DeleteConsumerGroup(group); err != nil {
		t.Fatal(err)
	}
	if err := adm.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
}
