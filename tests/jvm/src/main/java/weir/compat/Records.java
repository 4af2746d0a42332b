package weir.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Producers and consumers of strings, configured as the cases need them. */
public final class Records {
    private Records() {}

    /** An idempotent acks=all producer of strings, with {@code extra} settings. */
    public static KafkaProducer<String, String> producer(Properties extra) {
        Properties p = Weir.props();
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    /** A consumer of strings in {@code group} (null: no group), reading from the start. */
    public static KafkaConsumer<String, String> consumer(String group, Properties extra) {
        Properties p = Weir.props();
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    /** Sends {@code count} records "k{i}" → "v{i}" round-robin over partitions, waits for all. */
    public static void produce(String topic, int partitions, int count) {
        try (KafkaProducer<String, String> producer = producer(new Properties())) {
            List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, i % partitions, "k" + i, "v" + i)));
            }
            for (java.util.concurrent.Future<?> f : sent) {
                f.get();
            }
        } catch (InterruptedException | ExecutionException e) {
            throw new AssertionError("produce to " + topic, e);
        }
    }

    /** Reads {@code partitions} from {@code from} until {@code count} records arrived (at most 60 s). */
    public static List<ConsumerRecord<String, String>> read(
            Collection<TopicPartition> partitions, long from, int count) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer(null, new Properties())) {
            c.assign(partitions);
            for (TopicPartition tp : partitions) {
                c.seek(tp, from);
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (got.size() < count) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("read " + got.size() + " of " + count + " records");
                }
                c.poll(Duration.ofMillis(200)).forEach(got::add);
            }
        }
        return got;
    }
}
