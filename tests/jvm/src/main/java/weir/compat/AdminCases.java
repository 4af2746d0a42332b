package weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.Test;

/** The Java AdminClient: topics, cluster, configs, partitions, records, offsets, groups, SCRAM. */
class AdminCases {

    @Test
    void topicsAreCreatedDescribedGrownAndDeleted() throws Exception {
        String topic = Weir.unique("admin-topic");
        try (Admin admin = Weir.admin()) {
            admin.createTopics(List.of(new NewTopic(topic, 3, Weir.rf())
                    .configs(Map.of("cleanup.policy", "compact", "retention.ms", "3600000")))).all().get();
            ExecutionException again = assertThrows(ExecutionException.class,
                    () -> admin.createTopics(List.of(new NewTopic(topic, 3, Weir.rf()))).all().get());
            assertInstanceOf(TopicExistsException.class, again.getCause());
            assertTrue(admin.listTopics().names().get().contains(topic));

            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            assertEquals(3, d.partitions().size());
            assertNotNull(d.topicId());
            for (TopicPartitionInfo p : d.partitions()) {
                assertEquals(Weir.rf(), p.replicas().size(), "replicas of partition " + p.partition());
                assertEquals(Weir.rf(), p.isr().size(), "in-sync replicas of partition " + p.partition());
                assertNotNull(p.leader());
            }
            Config config = admin.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, topic)))
                    .all().get().values().iterator().next();
            assertEquals("compact", config.get("cleanup.policy").value());
            assertEquals("3600000", config.get("retention.ms").value());

            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
            Weir.await(Duration.ofSeconds(30), "five partitions", () -> {
                try {
                    return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size() == 5;
                } catch (InterruptedException | ExecutionException e) {
                    return false;
                }
            });

            admin.deleteTopics(List.of(topic)).all().get();
            Weir.await(Duration.ofSeconds(30), "the topic to be gone", () -> {
                try {
                    return !admin.listTopics().names().get().contains(topic);
                } catch (InterruptedException | ExecutionException e) {
                    return false;
                }
            });
            ExecutionException gone = assertThrows(ExecutionException.class,
                    () -> admin.describeTopics(List.of(topic)).allTopicNames().get());
            assertInstanceOf(UnknownTopicOrPartitionException.class, gone.getCause());
        }
    }

    @Test
    void clusterIsDescribedWithEveryNode() throws Exception {
        try (Admin admin = Weir.admin()) {
            DescribeClusterResult c = admin.describeCluster();
            Collection<Node> nodes = c.nodes().get();
            assertFalse(nodes.isEmpty());
            assertNotNull(c.clusterId().get());
            assertNotNull(c.controller().get());
            for (Node n : nodes) {
                assertTrue(n.port() > 0 && !n.host().isEmpty(), n.toString());
            }
        }
    }

    @Test
    void configsAreAlteredIncrementallyAndReset() throws Exception {
        String topic = Weir.topic("configs", 1);
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        try (Admin admin = Weir.admin()) {
            ConfigEntry retention = admin.describeConfigs(List.of(r)).all().get().get(r).get("retention.ms");
            String defaultRetention = retention.value();
            assertEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, retention.source());
            admin.incrementalAlterConfigs(Map.of(r, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "86400000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "200000"), AlterConfigOp.OpType.SET))))
                    .all().get();
            Config after = admin.describeConfigs(List.of(r)).all().get().get(r);
            assertEquals("86400000", after.get("retention.ms").value());
            assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, after.get("retention.ms").source());
            assertEquals("200000", after.get("max.message.bytes").value());
            admin.incrementalAlterConfigs(Map.of(r, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE))))
                    .all().get();
            Config reset = admin.describeConfigs(List.of(r)).all().get().get(r);
            assertEquals(defaultRetention, reset.get("retention.ms").value());
            assertEquals("200000", reset.get("max.message.bytes").value(), "the other override stays");
        }
    }

    @Test
    void recordsAreDeletedAndOffsetsListed() throws Exception {
        String topic = Weir.topic("delete-records", 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        long t0 = System.currentTimeMillis() - 60_000;
        try (KafkaProducer<String, String> producer = Records.producer(new Properties())) {
            for (int i = 0; i < 100; i++) {
                long at = i == 70 ? t0 + 10_000 : t0 + i;
                producer.send(new ProducerRecord<>(topic, 0, at, "k" + i, "v" + i));
            }
            producer.flush();
        }
        try (Admin admin = Weir.admin()) {
            assertEquals(40, admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(40)))
                    .lowWatermarks().get(tp).get().lowWatermark());
            ListOffsetsResult earliest = admin.listOffsets(Map.of(tp, OffsetSpec.earliest()));
            assertEquals(40, earliest.partitionResult(tp).get().offset());
            assertEquals(100, admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get().offset());
            ListOffsetsResult.ListOffsetsResultInfo max =
                    admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp).get();
            assertEquals(70, max.offset(), "the record with the largest timestamp");
            assertEquals(t0 + 10_000, max.timestamp());
        }
        List<ConsumerRecord<String, String>> read = Records.read(List.of(tp), 0, 60);
        assertEquals(40, read.get(0).offset(), "a read from before the log start begins at it");
    }

    @Test
    void consumerGroupsAreDescribedTheirOffsetsAlteredAndDeleted() throws Exception {
        String topic = Weir.topic("admin-groups", 2);
        Records.produce(topic, 2, 50);
        String group = Weir.unique("admin-group");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (Admin admin = Weir.admin()) {
            try (KafkaConsumer<String, String> c = Records.consumer(group, new Properties())) {
                c.subscribe(List.of(topic));
                List<ConsumerRecord<String, String>> got = new ArrayList<>();
                Weir.await(Duration.ofSeconds(60), "50 records", () -> {
                    c.poll(Duration.ofMillis(100)).forEach(got::add);
                    return got.size() >= 50;
                });
                c.commitSync();
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                assertEquals(GroupState.STABLE, d.groupState());
                assertEquals(1, d.members().size());
                assertEquals(Set.of(p0, p1), d.members().iterator().next().assignment().topicPartitions());
                assertEquals("range", d.partitionAssignor(), "the first assignor every member offers");
                ExecutionException busy = assertThrows(ExecutionException.class,
                        () -> admin.deleteConsumerGroups(List.of(group)).all().get());
                assertInstanceOf(GroupNotEmptyException.class, busy.getCause());
            }
            assertTrue(admin.listGroups().all().get().stream().anyMatch(g -> g.groupId().equals(group)));
            Map<TopicPartition, OffsetAndMetadata> offsets =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            assertEquals(25, offsets.get(p0).offset());
            assertEquals(25, offsets.get(p1).offset());

            admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(10))).all().get();
            offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            assertEquals(10, offsets.get(p0).offset(), "an empty group's offset moves back");
            admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all().get();
            offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            assertFalse(offsets.containsKey(p1) && offsets.get(p1) != null, "p1's offset is deleted: " + offsets);

            admin.deleteConsumerGroups(List.of(group)).all().get();
            assertTrue(admin.listGroups().all().get().stream().noneMatch(g -> g.groupId().equals(group)));
        }
    }

    @Test
    void scramCredentialsAreCreatedDescribedAndDeleted() throws Exception {
        String user = Weir.unique("scram-user");
        try (Admin admin = Weir.admin()) {
            admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "secret-1"),
                    new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "secret-2")))
                    .all().get();
            UserScramCredentialsDescription d = admin.describeUserScramCredentials(List.of(user)).all().get().get(user);
            assertEquals(2, d.credentialInfos().size());
            assertTrue(d.credentialInfos().contains(new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)));
            assertTrue(d.credentialInfos().contains(new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)));
            admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256),
                    new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512))).all().get();
            assertFalse(admin.describeUserScramCredentials().users().get().contains(user));
        }
    }
}
