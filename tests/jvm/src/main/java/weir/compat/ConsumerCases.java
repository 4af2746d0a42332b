package weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** The Java consumer: classic groups with each assignor, static members, seek, times, pause. */
class ConsumerCases {

    private static Properties assignor(Class<?> c) {
        Properties p = new Properties();
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, c.getName());
        return p;
    }

    /** Polls every consumer in turn until {@code done} holds (at most 60 s). */
    private static void pollAll(List<KafkaConsumer<String, String>> consumers,
            List<ConsumerRecord<String, String>> into, java.util.function.BooleanSupplier done) {
        Weir.await(Duration.ofSeconds(60), "consumers to reach their goal", () -> {
            for (KafkaConsumer<String, String> c : consumers) {
                c.poll(Duration.ofMillis(100)).forEach(into::add);
            }
            return done.getAsBoolean();
        });
    }

    private static boolean atEnd(KafkaConsumer<String, String> c, long end) {
        return c.assignment().stream().allMatch(tp -> c.position(tp) == end);
    }

    @Test
    void rangeGroupSplitsPartitionsAndResumesFromCommittedOffsets() {
        String topic = Weir.topic("range", 4);
        Records.produce(topic, 4, 400);
        String group = Weir.unique("range-group");
        List<ConsumerRecord<String, String>> got = new CopyOnWriteArrayList<>();
        try (KafkaConsumer<String, String> a = Records.consumer(group, assignor(RangeAssignor.class));
             KafkaConsumer<String, String> b = Records.consumer(group, assignor(RangeAssignor.class))) {
            a.subscribe(List.of(topic));
            b.subscribe(List.of(topic));
            // Done when each member holds two partitions and has read them to the end (a
            // may have read all four before b joined: b then reads its two again).
            pollAll(List.of(a, b), got, () -> a.assignment().size() == 2 && b.assignment().size() == 2
                    && atEnd(a, 100) && atEnd(b, 100));
            Set<TopicPartition> both = new HashSet<>(a.assignment());
            both.addAll(b.assignment());
            assertEquals(4, both.size(), "range gives each of two members two of four partitions");
            a.commitSync();
            b.commitSync();
        }
        Set<String> keys = new HashSet<>();
        got.forEach(r -> keys.add(r.key()));
        assertEquals(400, keys.size(), "every record was read");
        try (KafkaConsumer<String, String> again = Records.consumer(group, new Properties())) {
            Set<TopicPartition> tps = new HashSet<>();
            for (int p = 0; p < 4; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            Map<TopicPartition, OffsetAndMetadata> committed = again.committed(tps);
            for (TopicPartition tp : tps) {
                assertEquals(100, committed.get(tp).offset(), "committed position of " + tp);
            }
            again.subscribe(List.of(topic));
            Records.produce(topic, 4, 4);
            List<ConsumerRecord<String, String>> after = new ArrayList<>();
            pollAll(List.of(again), after, () -> after.size() >= 4);
            for (ConsumerRecord<String, String> r : after) {
                assertEquals(100, r.offset(), "a new member resumes at the committed offset");
            }
        }
    }

    @Test
    void cooperativeStickyMovesOnlyThePartitionsItMustMove() {
        String topic = Weir.topic("coop", 4);
        Records.produce(topic, 4, 40);
        String group = Weir.unique("coop-group");
        Map<String, List<TopicPartition>> revoked = new ConcurrentHashMap<>();
        class Listener implements ConsumerRebalanceListener {
            final String name;
            Listener(String name) {
                this.name = name;
                revoked.put(name, new CopyOnWriteArrayList<>());
            }
            @Override public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                revoked.get(name).addAll(partitions);
            }
            @Override public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
        }
        List<ConsumerRecord<String, String>> got = new CopyOnWriteArrayList<>();
        try (KafkaConsumer<String, String> a = Records.consumer(group, assignor(CooperativeStickyAssignor.class))) {
            a.subscribe(List.of(topic), new Listener("a"));
            pollAll(List.of(a), got, () -> a.assignment().size() == 4);
            Set<TopicPartition> before = new HashSet<>(a.assignment());
            try (KafkaConsumer<String, String> b = Records.consumer(group, assignor(CooperativeStickyAssignor.class))) {
                b.subscribe(List.of(topic), new Listener("b"));
                pollAll(List.of(a, b), got, () -> a.assignment().size() == 2 && b.assignment().size() == 2);
                assertEquals(2, revoked.get("a").size(), "a gave up exactly the two partitions b took: " + revoked);
                assertTrue(before.containsAll(a.assignment()), "a kept two of its own partitions");
                Set<TopicPartition> moved = new HashSet<>(revoked.get("a"));
                assertEquals(moved, b.assignment(), "b got what a gave up");
            }
        }
    }

    @Test
    void staticMemberRejoinsWithItsAssignmentAndNoNewGeneration() {
        String topic = Weir.topic("static", 2);
        Records.produce(topic, 2, 20);
        String group = Weir.unique("static-group");
        Properties stat = new Properties();
        stat.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "instance-1");
        stat.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "30000");
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        int generation;
        Set<TopicPartition> first;
        try (KafkaConsumer<String, String> a = Records.consumer(group, stat)) {
            a.subscribe(List.of(topic));
            pollAll(List.of(a), got, () -> a.assignment().size() == 2);
            generation = a.groupMetadata().generationId();
            first = new HashSet<>(a.assignment());
            assertEquals("instance-1", a.groupMetadata().groupInstanceId().orElse(null));
        }
        // A static member's close sends no LeaveGroup: the group keeps it for the session.
        try (KafkaConsumer<String, String> again = Records.consumer(group, stat)) {
            again.subscribe(List.of(topic));
            pollAll(List.of(again), got, () -> again.assignment().size() == 2);
            assertEquals(first, again.assignment());
            assertEquals(generation, again.groupMetadata().generationId(),
                    "a static member's return does not start a new generation");
        }
    }

    @Test
    void seekOffsetsForTimesAndPauseResume() throws Exception {
        String topic = Weir.topic("times", 2);
        long t0 = System.currentTimeMillis() - 1_000_000;
        try (KafkaProducer<String, String> producer = Records.producer(new Properties())) {
            for (int i = 0; i < 100; i++) {
                producer.send(new ProducerRecord<>(topic, 0, t0 + i * 1000L, "k" + i, "v" + i));
                producer.send(new ProducerRecord<>(topic, 1, t0 + i * 1000L, "k" + i, "v" + i));
            }
            producer.flush();
        }
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (KafkaConsumer<String, String> c = Records.consumer(null, new Properties())) {
            c.assign(List.of(p0, p1));
            Map<TopicPartition, OffsetAndTimestamp> found = c.offsetsForTimes(Map.of(p0, t0 + 50_500L, p1, t0 + 99_000L));
            assertEquals(51, found.get(p0).offset(), "the first record at or after the time");
            assertEquals(t0 + 51_000L, found.get(p0).timestamp());
            assertEquals(99, found.get(p1).offset());
            Map<TopicPartition, OffsetAndTimestamp> none = c.offsetsForTimes(Map.of(p0, t0 + 200_000L));
            assertEquals(null, none.get(p0), "no record at or after a later time");
            assertEquals(Map.of(p0, 100L, p1, 100L), c.endOffsets(List.of(p0, p1)));
            assertEquals(Map.of(p0, 0L, p1, 0L), c.beginningOffsets(List.of(p0, p1)));

            c.seek(p0, 90);
            c.seek(p1, 95);
            c.pause(List.of(p1));
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            pollAll(List.of(c), got, () -> got.size() >= 10);
            for (ConsumerRecord<String, String> r : got) {
                assertEquals(0, r.partition(), "a paused partition returns nothing");
            }
            assertEquals(90, got.get(0).offset());
            assertEquals(100, c.position(p0));
            assertEquals(95, c.position(p1));
            c.resume(List.of(p1));
            List<ConsumerRecord<String, String>> resumed = new ArrayList<>();
            pollAll(List.of(c), resumed, () -> resumed.size() >= 5);
            assertEquals(95, resumed.get(0).offset());
            assertEquals(1, resumed.get(0).partition());
            assertNotNull(resumed.get(0).value());
            Map<Integer, Long> last = new HashMap<>();
            resumed.forEach(r -> last.put(r.partition(), r.offset()));
            assertEquals(99L, last.get(1));
        }
    }
}
