package weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Transactions with the Java client 4.4, which speaks transactions V2 to weir (an epoch
 * bump per transaction, partitions enrolled by their leaders): committed and aborted transactions as
 * read_committed and read_uncommitted consumers see them, a zombie fenced by a new
 * instance, Kafka's kafka-transactions.sh (list, describe, describe-producers, abort of a
 * hanging transaction), and a Kafka Streams word count with exactly_once_v2 whose counts
 * are exact, also after the instance is replaced.
 */
class TransactionCases {
    private static KafkaProducer<String, String> transactional(String id) {
        Properties extra = new Properties();
        extra.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        KafkaProducer<String, String> p = Records.producer(extra);
        p.initTransactions();
        return p;
    }

    private static void send(KafkaProducer<String, String> p, String topic, String prefix, int n) {
        for (int i = 0; i < n; i++) {
            p.send(new ProducerRecord<>(topic, i % 3, prefix + i, prefix + i));
        }
        p.flush();
    }

    /** Keys readable from the start of {@code topic}'s 3 partitions at {@code isolation}. */
    private static List<String> keys(String topic, String isolation, int expect) {
        Properties extra = new Properties();
        extra.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = Records.consumer(null, extra)) {
            List<TopicPartition> tps = List.of(0, 1, 2).stream()
                    .map(i -> new TopicPartition(topic, i)).collect(Collectors.toList());
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
            while (got.size() < expect && System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(r -> got.add(r.key()));
            }
            // Nothing more arrives than expected.
            c.poll(Duration.ofMillis(500)).forEach(r -> got.add(r.key()));
        }
        return got;
    }

    @Test
    void readCommittedSeesOnlyCommittedTransactionsAndAZombieIsFenced() {
        String topic = Weir.topic("txn", 3);
        String id = Weir.unique("txn-id");
        KafkaProducer<String, String> p = transactional(id);
        p.beginTransaction();
        send(p, topic, "committed", 30);
        p.commitTransaction();
        p.beginTransaction();
        send(p, topic, "aborted", 30);
        p.abortTransaction();
        p.beginTransaction();
        send(p, topic, "later", 10);
        p.commitTransaction();

        // Transactions V2 (the broker finalizes transaction.version 2): every transaction
        // ended at a new epoch, whose markers moved the partitions' producer there.
        try (Admin admin = Weir.admin()) {
            TopicPartition first = new TopicPartition(topic, 0);
            List<ProducerState> producers = admin.describeProducers(List.of(first))
                    .partitionResult(first).get().activeProducers();
            assertEquals(List.of(3), producers.stream().map(ProducerState::producerEpoch)
                    .collect(Collectors.toList()), "epochs after three transactions: " + producers);
        } catch (Exception e) {
            throw new AssertionError("describe producers", e);
        }

        List<String> committed = keys(topic, "read_committed", 40);
        assertEquals(40, committed.size(), "read_committed: " + committed);
        assertTrue(committed.stream().noneMatch(k -> k.startsWith("aborted")), "an aborted record was read");
        assertEquals(70, keys(topic, "read_uncommitted", 70).size(), "read_uncommitted reads everything");

        p.beginTransaction();
        send(p, topic, "zombie", 6);
        KafkaProducer<String, String> successor = transactional(id);
        KafkaException fenced = assertThrows(KafkaException.class, p::commitTransaction);
        assertTrue(fenced instanceof ProducerFencedException
                || fenced.getCause() instanceof ProducerFencedException, "fenced: " + fenced);
        p.close(Duration.ZERO);
        successor.beginTransaction();
        send(successor, topic, "successor", 3);
        successor.commitTransaction();
        successor.close();
        List<String> after = keys(topic, "read_committed", 43);
        assertEquals(43, after.size(), "read_committed after the fencing: " + after);
        assertTrue(after.stream().noneMatch(k -> k.startsWith("zombie")), "the zombie's records were read");
    }

    /** kafka-transactions.sh: its options, --command-config included, go before the subcommand. */
    private static Tool.Run transactionsTool(String... args) {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", Weir.bootstrap()));
        if (Weir.clientConfigFile() != null) {
            all.addAll(List.of("--command-config", Weir.clientConfigFile()));
        }
        all.addAll(List.of(args));
        return Tool.run("org.apache.kafka.tools.TransactionsCommand", all.toArray(new String[0]));
    }

    @Test
    void kafkaTransactionsToolListsDescribesAndAbortsAHangingTransaction() {
        String topic = Weir.topic("txn-tool", 3);
        String id = Weir.unique("txn-tool-id");
        KafkaProducer<String, String> hanging = transactional(id);
        hanging.beginTransaction();
        send(hanging, topic, "hanging", 3);
        try {
            Weir.await(Duration.ofSeconds(30), "the id in kafka-transactions.sh list",
                    () -> transactionsTool("list").out().lines()
                            .anyMatch(l -> l.startsWith(id) && l.contains("Ongoing")));
            Tool.Run described = transactionsTool("describe", "--transactional-id", id).ok();
            assertTrue(described.out().contains("Ongoing") && described.out().contains(topic + "-0"),
                    described.out());
            Tool.Run producers = transactionsTool("describe-producers", "--topic", topic, "--partition", "0").ok();
            assertTrue(producers.out().lines().skip(1).anyMatch(l -> l.trim().endsWith("0")),
                    "the producer's transaction starts at offset 0: " + producers.out());
            // Kafka's abort writes the ABORT marker at the partition's leader itself.
            transactionsTool("abort", "--topic", topic, "--partition", "0", "--start-offset", "0").ok();
            Properties extra = new Properties();
            extra.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            try (KafkaConsumer<String, String> c = Records.consumer(null, extra)) {
                TopicPartition tp = new TopicPartition(topic, 0);
                Weir.await(Duration.ofSeconds(30), "the LSO past the aborted records",
                        () -> c.endOffsets(List.of(tp)).get(tp) >= 2);
            }
        } finally {
            hanging.close(Duration.ZERO);
        }
    }

    private static KafkaStreams startExactlyOnce(String app, String input, String output, Path state) {
        return startExactlyOnce(app, input, output, state, false);
    }

    /**
     * The exactly_once_v2 word count, running; with {@code replaceFailedThreads} a stream
     * thread that dies of an error (a broker killed under it) is replaced, as an
     * application that must outlive broker failures configures it.
     */
    static KafkaStreams startExactlyOnce(String app, String input, String output, Path state,
            boolean replaceFailedThreads) {
        Properties p = Weir.props();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.STATE_DIR_CONFIG, state.toString());
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, Integer.toString(Weir.rf()));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "6000");
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1000");
        KafkaStreams streams = new KafkaStreams(StreamsCases.wordCount(input, output), p);
        if (replaceFailedThreads) {
            streams.setUncaughtExceptionHandler(e -> StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                    .REPLACE_THREAD);
        }
        streams.start();
        Weir.await(Duration.ofSeconds(60), "streams to run", () -> streams.state() == KafkaStreams.State.RUNNING);
        return streams;
    }

    /** Waits until the latest committed count per word equals {@code expected}. */
    private static void awaitCounts(String output, Map<String, Long> expected) {
        awaitCounts(output, expected, Duration.ofSeconds(90));
    }

    /**
     * Waits up to {@code within} until the latest read_committed count per word equals
     * {@code expected}, failing at once on a count above the exact one.
     */
    static void awaitCounts(String output, Map<String, Long> expected, Duration within) {
        Map<String, Long> latest = new HashMap<>();
        Properties p = Weir.props();
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", LongDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = c.partitionsFor(output).stream()
                    .map(i -> new TopicPartition(output, i.partition()))
                    .collect(Collectors.toList());
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + within.toNanos();
            while (!latest.equals(expected)) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("counts " + latest + " never became " + expected);
                }
                for (ConsumerRecord<String, Long> r : c.poll(Duration.ofMillis(200))) {
                    latest.put(r.key(), r.value());
                    Long want = expected.get(r.key());
                    assertTrue(want != null && r.value() <= want,
                            "a count past the exact one: " + r.key() + "=" + r.value() + ", want " + want);
                }
            }
        }
    }

    @Test
    void streamsExactlyOnceV2CountsEachLineOnceAcrossAReplacedInstance(@TempDir Path state1, @TempDir Path state2)
            throws Exception {
        String app = Weir.unique("eos-wordcount");
        String input = Weir.topic("eos-lines", 3);
        String output = Weir.topic("eos-counts", 3);
        Map<String, Long> expected = StreamsCases.sendLines(input, 0, 300, new HashMap<>());
        KafkaStreams streams = startExactlyOnce(app, input, output, state1);
        try {
            awaitCounts(output, expected);
        } finally {
            streams.close();
        }
        // A new instance with an empty state directory restores the store from the
        // changelog (read_committed) and goes on from the transactionally committed
        // offsets: no line is counted twice.
        StreamsCases.sendLines(input, 300, 450, expected);
        KafkaStreams restarted = startExactlyOnce(app, input, output, state2);
        try {
            awaitCounts(output, expected);
        } finally {
            restarted.close();
        }
    }
}
