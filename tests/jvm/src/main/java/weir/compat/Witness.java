package weir.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A read_committed reader that follows a topic while an application writes it, and
 * remembers every record it was given by the line it came from (the {@code line} header
 * the input producer set, which Kafka Streams carries through its stages). It sees what
 * the application's own read_committed consumers could see at the time, so it still
 * tells after a failed run what a topic held before Streams purged it: a line whose
 * records it was given more often than the line holds them was written twice and
 * committed (or an aborted copy reached a read_committed reader).
 */
final class Witness implements AutoCloseable {
    private final String topic;
    private final AtomicBoolean running = new AtomicBoolean(true);
    private final Thread thread;
    /** Line number → the records seen for it, "partition@offset:key". */
    private final Map<Long, List<String>> byLine = new TreeMap<>();
    private volatile String trouble = "";

    /** Starts following {@code topic} (which may not exist yet) from its start. */
    Witness(String topic) {
        this.topic = topic;
        this.thread = new Thread(this::follow, "witness-" + topic);
        this.thread.setDaemon(true);
        this.thread.start();
    }

    private void follow() {
        Properties p = Weir.props();
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = List.of();
            while (running.get() && tps.isEmpty()) {
                tps = c.listTopics().getOrDefault(topic, List.of()).stream()
                        .map(i -> new TopicPartition(topic, i.partition()))
                        .collect(Collectors.toList());
                if (tps.isEmpty()) {
                    Thread.sleep(200);
                }
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            while (running.get()) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    Header h = r.headers().lastHeader("line");
                    long line = h == null ? -1 : Long.parseLong(new String(h.value(), StandardCharsets.UTF_8));
                    String key = r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8);
                    synchronized (byLine) {
                        byLine.computeIfAbsent(line, l -> new ArrayList<>())
                                .add(r.partition() + "@" + r.offset() + ":" + key);
                    }
                }
            }
        } catch (Exception e) {
            trouble = " (the witness stopped: " + e + ")";
        }
    }

    /**
     * The lines of which some key came more often than the line holds it, each with the
     * records seen for it; {@code holds} gives, for a line number, how many records of
     * each key one processing of the line writes to this topic (at most).
     */
    String repeated(Function<Long, Map<String, Long>> holds) {
        synchronized (byLine) {
            String lines = byLine.entrySet().stream()
                    .filter(e -> {
                        Map<String, Long> seen = e.getValue().stream()
                                .collect(Collectors.groupingBy(r -> r.replaceAll("^[^:]*:", ""), Collectors.counting()));
                        Map<String, Long> once = holds.apply(e.getKey());
                        return seen.entrySet().stream().anyMatch(k -> k.getValue() > once.getOrDefault(k.getKey(), 0L));
                    })
                    .map(e -> "line" + e.getKey() + " " + e.getValue())
                    .collect(Collectors.joining("; "));
            return topic + ": " + byLine.size() + " lines seen, repeated: [" + lines + "]" + trouble;
        }
    }

    @Override
    public void close() {
        running.set(false);
        try {
            thread.join(5000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
