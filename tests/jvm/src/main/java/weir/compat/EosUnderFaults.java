package weir.compat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
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
        Path state = Path.of(args[0]);
        int rounds = Integer.parseInt(args[1]);
        String input = Weir.topic("eos-faults-lines", 3);
        String output = Weir.topic("eos-faults-counts", 3);
        KafkaStreams streams = TransactionCases.startExactlyOnce(Weir.unique("eos-faults"), input, output, state,
                true);
        int status = 1;
        try {
            System.out.println("streams running");
            System.out.flush();
            Map<String, Long> expected = new HashMap<>();
            Properties patient = new Properties();
            patient.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
            try (KafkaProducer<String, String> producer = Records.producer(patient)) {
                for (int round = 0; round < rounds; round++) {
                    List<Future<RecordMetadata>> sent = new ArrayList<>();
                    for (int i = round * LINES_PER_ROUND; i < (round + 1) * LINES_PER_ROUND; i++) {
                        String line = WORDS.get(i % WORDS.size()) + " " + WORDS.get((i * 3) % WORDS.size()) + " weir";
                        for (String w : line.toLowerCase(Locale.ROOT).split(" ")) {
                            expected.merge(w, 1L, Long::sum);
                        }
                        sent.add(producer.send(new ProducerRecord<>(input, "line" + i, line)));
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
        } finally {
            streams.close(Duration.ofSeconds(20));
        }
        System.exit(status);
    }
}
