package weir.compat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.streams.KafkaStreams;

/**
 * Kafka Streams exactly_once_v2 while the Rust test (tests/jvm_clients.rs) kills hosts
 * under it: the word count of {@link StreamsCases#wordCount} over a 3-partition input at
 * the run's replication factor. Prints {@code streams running} once the instance runs,
 * then writes its lines a round a second, every line acknowledged by an idempotent
 * acks=all producer (a line whose send failed would leave the exact count unknown, so
 * that fails the run); then waits until the latest read_committed count of every word
 * equals the exact count, failing on any count above it. Exit 0 when it does, 1 with the
 * reason otherwise.
 *
 * <p>Usage: {@code java -Dweir.bootstrap=HOSTS -Dweir.rf=3 weir.compat.EosUnderFaults
 * STATE_DIR ROUNDS}
 */
public final class EosUnderFaults {
    private static final int LINES_PER_ROUND = 40;
    private static final List<String> WORDS = List.of("weir", "kafka", "log", "shard", "flush", "group", "epoch");

    private EosUnderFaults() {}

    public static void main(String[] args) throws Exception {
        // Before any logger exists: a failed run is read from these logs.
        System.setProperty("log4j2.configurationFile", "eos-log4j2.properties");
        Path state = Path.of(args[0]);
        int rounds = Integer.parseInt(args[1]);
        String input = Weir.topic("eos-faults-lines", 3);
        String output = Weir.topic("eos-faults-counts", 3);
        String app = Weir.unique("eos-faults");
        KafkaStreams streams = TransactionCases.startExactlyOnce(app, input, output, state, true);
        int status = 1;
        Map<String, Long> expected = new HashMap<>();
        Witness repartition = new Witness(app + "-by-word-repartition");
        Witness counts = new Witness(output);
        try {
            System.out.println("streams running");
            System.out.flush();
            Properties patient = new Properties();
            patient.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
            try (KafkaProducer<String, String> producer = Records.producer(patient)) {
                for (int round = 0; round < rounds; round++) {
                    List<Future<RecordMetadata>> sent = new ArrayList<>();
                    for (int i = round * LINES_PER_ROUND; i < (round + 1) * LINES_PER_ROUND; i++) {
                        for (String w : line(i).split(" ")) {
                            expected.merge(w, 1L, Long::sum);
                        }
                        ProducerRecord<String, String> record = new ProducerRecord<>(input, "line" + i, line(i));
                        record.headers().add("line", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                        sent.add(producer.send(record));
                    }
                    for (Future<RecordMetadata> f : sent) {
                        f.get();
                    }
                    Thread.sleep(1000);
                }
            }
            System.out.println("sent " + rounds * LINES_PER_ROUND + " lines; expecting " + expected);
            TransactionCases.awaitCounts(output, expected, Duration.ofSeconds(180));
            System.out.println("every count exact: " + expected);
            status = 0;
        } catch (Throwable e) {
            System.out.println("FAILED: " + e);
            e.printStackTrace(System.out);
            diagnose(streams, app, input, output);
            stages(app, input, output, expected);
        } finally {
            // Each word of a line is one repartition record; a count record names the
            // line of the last word it counted, so a line names a word's count once,
            // or (a line repeating the word) as often as it holds it.
            System.out.println(repartition.repeated(EosUnderFaults::wordsOf));
            System.out.println(counts.repeated(EosUnderFaults::wordsOf));
            repartition.close();
            counts.close();
            streams.close(Duration.ofSeconds(20));
        }
        System.exit(status);
    }

    /** Line {@code i} of the input (words of {@link #WORDS}, lower case). */
    private static String line(long i) {
        return WORDS.get((int) (i % WORDS.size())) + " " + WORDS.get((int) ((i * 3) % WORDS.size())) + " weir";
    }

    /** How often each word occurs in line {@code i}. */
    private static Map<String, Long> wordsOf(long i) {
        return java.util.Arrays.stream(line(i).split(" "))
                .collect(Collectors.groupingBy(w -> w, Collectors.counting()));
    }

    /**
     * What a failed run needs to be told apart: the application's state; per partition
     * of its topics the high watermark beside the last stable offset (an LSO held back
     * is a transaction nobody ends); the group's committed offsets (input not consumed);
     * and the transactions still open with their partitions.
     */
    private static void diagnose(KafkaStreams streams, String app, String input, String output) {
        System.out.println("streams state: " + streams.state());
        try (Admin admin = Weir.admin()) {
            List<String> topics = new ArrayList<>(List.of(input, output));
            admin.listTopics().names().get().stream().filter(t -> t.startsWith(app)).sorted().forEach(topics::add);
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (TopicDescription d : admin.describeTopics(topics).allTopicNames().get().values()) {
                d.partitions().forEach(p -> latest.put(new TopicPartition(d.name(), p.partition()), OffsetSpec.latest()));
            }
            var hw = admin.listOffsets(latest).all().get();
            var lso = admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get();
            var committed = admin.listConsumerGroupOffsets(app).partitionsToOffsetAndMetadata().get();
            latest.keySet().stream().sorted(Comparator.comparing(TopicPartition::toString)).forEach(tp -> {
                OffsetAndMetadata c = committed.get(tp);
                System.out.println(tp + ": hw " + hw.get(tp).offset() + ", lso " + lso.get(tp).offset()
                        + (c == null ? "" : ", committed " + c.offset()));
            });
            var open = admin.listTransactions().all().get().stream()
                    .filter(t -> t.state() != TransactionState.COMPLETE_COMMIT
                            && t.state() != TransactionState.COMPLETE_ABORT && t.state() != TransactionState.EMPTY)
                    .map(TransactionListing::transactionalId)
                    .collect(Collectors.toList());
            if (!open.isEmpty()) {
                admin.describeTransactions(open).all().get().forEach((id, t) -> System.out.println(
                        "open transaction " + id + ": " + t.state() + ", producer " + t.producerId() + "/"
                                + t.producerEpoch() + ", partitions " + t.topicPartitions()));
            }
            for (TopicPartition tp : latest.keySet()) {
                if (hw.get(tp).offset() != lso.get(tp).offset()) {
                    admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()
                            .forEach(p -> System.out.println("producer on " + tp + ": " + p));
                }
            }
        } catch (Exception e) {
            System.out.println("diagnosis failed: " + e);
        }
    }

    /**
     * Which stage counted a word past its exact count: the input's lines (each key once;
     * the repartition topic is purged as Streams commits, so it tells nothing after the
     * fact), and for every word whose latest count passed the exact one, the counts the
     * output and the changelog hold for it in offset order (a step of two, or a fall, is
     * where it went wrong).
     */
    private static void stages(String app, String input, String output, Map<String, Long> expected) {
        try {
            Map<String, Long> lines = new HashMap<>();
            readAll(input, "read_committed").forEach(r -> lines.merge(new String(r.key()), 1L, Long::sum));
            System.out.println("input: " + lines.size() + " distinct lines, repeated: "
                    + lines.entrySet().stream().filter(e -> e.getValue() > 1).map(Map.Entry::getKey)
                            .collect(Collectors.toList()));
            for (String topic : List.of(output, app + "-counts-changelog")) {
                Map<String, List<String>> counts = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : readAll(topic, "read_committed")) {
                    long value = r.value() == null || r.value().length < 8 ? -1
                            : java.nio.ByteBuffer.wrap(r.value(), 0, 8).getLong();
                    counts.computeIfAbsent(new String(r.key()), k -> new ArrayList<>())
                            .add(r.partition() + "@" + r.offset() + "=" + value);
                }
                counts.forEach((word, seen) -> {
                    long last = Long.parseLong(seen.get(seen.size() - 1).replaceAll(".*=", ""));
                    if (last > expected.getOrDefault(word, 0L)) {
                        System.out.println(topic + " counts of " + word + ": " + seen);
                    }
                });
            }
        } catch (Exception e) {
            System.out.println("stages unread: " + e);
        }
    }

    /** Every record of {@code topic} a consumer at {@code isolation} reads, to its end. */
    private static List<ConsumerRecord<byte[], byte[]>> readAll(String topic, String isolation) {
        Properties p = Weir.props();
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = c.partitionsFor(topic).stream()
                    .map(i -> new TopicPartition(topic, i.partition()))
                    .collect(Collectors.toList());
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp)) && System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(out::add);
            }
        }
        return out;
    }
}
