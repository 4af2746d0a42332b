package weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Kafka Streams 4.4 at-least-once: a word count with a state store, whose repartition
 * and changelog topics Streams creates itself, gives the right counts, also after the
 * instance is replaced by one with an empty state directory (restored from the changelog).
 */
class StreamsCases {
    private static final List<String> WORDS = List.of("weir", "kafka", "log", "shard", "flush", "group", "epoch");

    /** The word count: lines split into words, counted per word into {@code output}. */
    static Topology wordCount(String input, String output) {
        StreamsBuilder b = new StreamsBuilder();
        b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\s+")))
                .groupBy((key, word) -> word, Grouped.with("by-word", Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return b.build();
    }

    private static KafkaStreams start(String app, String input, String output, Path state) {
        Properties p = Weir.props();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.STATE_DIR_CONFIG, state.toString());
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, Integer.toString(Weir.rf()));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        // A closed Streams instance does not leave its group: the next one's rebalance
        // waits for the session to expire, so keep it short.
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "6000");
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1000");
        KafkaStreams streams = new KafkaStreams(wordCount(input, output), p);
        streams.start();
        Weir.await(Duration.ofSeconds(60), "streams to run", () -> streams.state() == KafkaStreams.State.RUNNING);
        return streams;
    }

    /** Sends lines [from, to) of the deterministic text; returns their word counts. */
    static Map<String, Long> sendLines(String input, int from, int to, Map<String, Long> counts) {
        try (KafkaProducer<String, String> producer = Records.producer(new Properties())) {
            for (int i = from; i < to; i++) {
                String line = WORDS.get(i % WORDS.size()) + " " + WORDS.get((i * 3) % WORDS.size()) + " weir";
                for (String w : line.split(" ")) {
                    counts.merge(w, 1L, Long::sum);
                }
                producer.send(new ProducerRecord<>(input, "line" + i, line));
            }
            producer.flush();
        }
        return counts;
    }

    /** The latest count per word in the output topic once it equals {@code expected} (60 s). */
    private static void awaitCounts(String output, Map<String, Long> expected) {
        Map<String, Long> latest = new HashMap<>();
        Properties p = Weir.props();
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", LongDeserializer.class.getName());
        try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(p)) {
            List<org.apache.kafka.common.TopicPartition> tps = c.partitionsFor(output).stream()
                    .map(i -> new org.apache.kafka.common.TopicPartition(output, i.partition()))
                    .collect(Collectors.toList());
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (!latest.equals(expected)) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("counts " + latest + " never became " + expected);
                }
                for (ConsumerRecord<String, Long> r : c.poll(Duration.ofMillis(200))) {
                    latest.put(r.key(), r.value());
                }
            }
        }
    }

    @Test
    void wordCountIsRightAndSurvivesARestartFromTheChangelog(@TempDir Path state1, @TempDir Path state2)
            throws Exception {
        String app = Weir.unique("wordcount");
        String input = Weir.topic("lines", 3);
        String output = Weir.topic("counts", 3);
        Map<String, Long> expected = sendLines(input, 0, 300, new HashMap<>());
        try (KafkaStreams streams = start(app, input, output, state1)) {
            awaitCounts(output, expected);
            assertEquals(expected.get("weir"), streams.store(
                    org.apache.kafka.streams.StoreQueryParameters.fromNameAndType("counts",
                            org.apache.kafka.streams.state.QueryableStoreTypes.<String, Long>keyValueStore()))
                    .get("weir"), "the state store holds the count");
        }
        try (Admin admin = Weir.admin()) {
            Set<String> topics = admin.listTopics().names().get();
            String changelog = app + "-counts-changelog";
            assertTrue(topics.contains(changelog), "Streams created " + changelog + ": " + topics);
            assertTrue(topics.contains(app + "-by-word-repartition"), "Streams created the repartition topic");
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, changelog);
            Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
            assertEquals("compact", c.get("cleanup.policy").value(), "a changelog is compacted");
        }
        // A new instance with an empty state directory restores the store from the
        // changelog and goes on from the committed offsets.
        sendLines(input, 300, 450, expected);
        KafkaStreams restarted = start(app, input, output, state2);
        try {
            awaitCounts(output, expected);
        } finally {
            restarted.close();
        }
    }
}
