package weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

/** The Java producer: idempotent, acks=all, every codec, headers, large batches. */
class ProducerCases {

    @ParameterizedTest
    @ValueSource(strings = {"none", "gzip", "snappy", "lz4", "zstd"})
    void idempotentProducerRoundTripsEveryCodecWithHeaders(String codec) throws Exception {
        int partitions = 3;
        int count = 600;
        String topic = Weir.topic("codec-" + codec, partitions);
        Properties extra = new Properties();
        extra.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        extra.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        Map<Integer, List<Long>> offsets = new HashMap<>();
        try (KafkaProducer<String, String> producer = Records.producer(extra)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                List<Header> headers = List.of(
                        new RecordHeader("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8)),
                        new RecordHeader("codec", codec.getBytes(StandardCharsets.UTF_8)));
                sent.add(producer.send(new ProducerRecord<>(topic, i % partitions, null, "k" + i, "v" + i, headers)));
            }
            for (Future<RecordMetadata> f : sent) {
                RecordMetadata m = f.get();
                offsets.computeIfAbsent(m.partition(), p -> new ArrayList<>()).add(m.offset());
            }
        }
        for (int p = 0; p < partitions; p++) {
            List<Long> got = offsets.get(p);
            for (int j = 0; j < got.size(); j++) {
                assertEquals(j, got.get(j), "partition " + p + " offsets are dense from 0");
            }
        }
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        List<ConsumerRecord<String, String>> read = Records.read(tps, 0, count);
        assertEquals(count, read.size());
        Map<Integer, Integer> next = new HashMap<>();
        for (ConsumerRecord<String, String> r : read) {
            int i = Integer.parseInt(r.key().substring(1));
            assertEquals(r.partition(), i % partitions);
            int expected = next.getOrDefault(r.partition(), r.partition());
            assertEquals(expected, i, "records of partition " + r.partition() + " in order");
            next.put(r.partition(), i + partitions);
            assertEquals("v" + i, r.value());
            assertEquals(Integer.toString(i), new String(r.headers().lastHeader("i").value(), StandardCharsets.UTF_8));
            assertEquals(codec, new String(r.headers().lastHeader("codec").value(), StandardCharsets.UTF_8));
        }
    }

    @Test
    void largeBatchesAreStoredWholeAndOversizedRecordsAreRefused() throws Exception {
        String topic = Weir.unique("large");
        try (Admin admin = Weir.admin()) {
            admin.createTopics(List.of(new NewTopic(topic, 1, Weir.rf())
                    .configs(Map.of("max.message.bytes", "600000")))).all().get();
        }
        Properties extra = new Properties();
        extra.put(ProducerConfig.BATCH_SIZE_CONFIG, Integer.toString(512 * 1024));
        extra.put(ProducerConfig.LINGER_MS_CONFIG, "50");
        extra.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, Integer.toString(4 * 1024 * 1024));
        char[] fill = new char[10_000];
        Arrays.fill(fill, 'x');
        String value = new String(fill);
        try (KafkaProducer<String, String> producer = Records.producer(extra)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < 200; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, 0, "k" + i, value)));
            }
            for (Future<RecordMetadata> f : sent) {
                f.get();
            }
            char[] big = new char[1_000_000];
            Arrays.fill(big, 'y');
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> producer.send(new ProducerRecord<>(topic, 0, "big", new String(big))).get());
            assertInstanceOf(RecordTooLargeException.class, e.getCause(), e.toString());
        }
        List<ConsumerRecord<String, String>> read = Records.read(List.of(new TopicPartition(topic, 0)), 0, 200);
        assertEquals(200, read.size());
        for (int i = 0; i < 200; i++) {
            assertEquals(i, read.get(i).offset());
            assertEquals("k" + i, read.get(i).key());
            assertEquals(value, read.get(i).value());
        }
    }
}
