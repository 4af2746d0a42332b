package weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

/**
 * Kafka's own command-line tools from kafka-tools 4.4.0, each run as its shell wrapper
 * runs it, with the output parsed and checked.
 */
class ToolCases {
    private static final String TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand";
    private static final String GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    private static final String CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand";
    private static final String CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer";
    private static final String CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer";

    private static Tool.Run tool(String tool, String... args) {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", Weir.bootstrap()));
        all.addAll(List.of(args));
        return Tool.run(tool, Tool.withConfig("--command-config", all.toArray(new String[0])));
    }

    private static Tool.Run toolWithInput(String tool, String input, String... args) {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", Weir.bootstrap()));
        all.addAll(List.of(args));
        return Tool.runWithInput(tool, input, Tool.withConfig("--command-config", all.toArray(new String[0])));
    }

    /** Topic names TopicCommand --list prints. */
    private static List<String> listTopics() {
        return tool(TOPIC_COMMAND, "--list").ok().lines();
    }

    @Test
    void topicCommandCreatesListsDescribesAltersAndDeletes() {
        String topic = Weir.unique("tool-topic");
        Tool.Run created = tool(TOPIC_COMMAND, "--create", "--topic", topic, "--partitions", "3",
                "--replication-factor", Short.toString(Weir.rf()), "--config", "retention.ms=3600000").ok();
        assertTrue(created.out().contains("Created topic " + topic), created.out());
        assertTrue(listTopics().contains(topic));

        Tool.Run described = tool(TOPIC_COMMAND, "--describe", "--topic", topic).ok();
        assertTrue(described.out().contains("PartitionCount: 3"), described.out());
        assertTrue(described.out().contains("ReplicationFactor: " + Weir.rf()), described.out());
        assertTrue(described.out().contains("retention.ms=3600000"), described.out());
        Pattern row = Pattern.compile("Partition: (\\d+)\\s+Leader: (\\d+)\\s+Replicas: ([\\d,]+)\\s+Isr: ([\\d,]+)");
        Matcher m = row.matcher(described.out());
        int rows = 0;
        while (m.find()) {
            rows++;
            assertEquals(Weir.rf(), m.group(3).split(",").length, m.group());
            assertEquals(Weir.rf(), m.group(4).split(",").length, m.group());
            assertTrue(List.of(m.group(3).split(",")).contains(m.group(2)), "the leader is a replica: " + m.group());
        }
        assertEquals(3, rows, described.out());

        tool(TOPIC_COMMAND, "--alter", "--topic", topic, "--partitions", "5").ok();
        Weir.await(java.time.Duration.ofSeconds(30), "five partitions",
                () -> tool(TOPIC_COMMAND, "--describe", "--topic", topic).out().contains("PartitionCount: 5"));

        tool(TOPIC_COMMAND, "--delete", "--topic", topic).ok();
        Weir.await(java.time.Duration.ofSeconds(30), "the topic to be gone", () -> !listTopics().contains(topic));
        Tool.Run missing = tool(TOPIC_COMMAND, "--describe", "--topic", topic);
        assertNotEquals(0, missing.status());
        assertTrue((missing.out() + missing.err()).contains("does not exist"), missing.err());
    }

    @Test
    void consoleProducerAndConsumerRoundTripKeysAndValues() {
        String topic = Weir.topic("console", 1);
        StringBuilder input = new StringBuilder();
        for (int i = 0; i < 20; i++) {
            input.append("key").append(i).append(':').append("value ").append(i).append('\n');
        }
        toolWithInput(CONSOLE_PRODUCER, input.toString(), "--topic", topic,
                "--reader-property", "parse.key=true", "--reader-property", "key.separator=:").ok();
        Tool.Run consumed = tool(CONSOLE_CONSUMER, "--topic", topic, "--from-beginning", "--max-messages", "20",
                "--formatter-property", "print.key=true", "--formatter-property", "key.separator=|",
                "--formatter-property", "print.offset=true", "--timeout-ms", "30000").ok();
        List<String> lines = consumed.lines();
        assertEquals(20, lines.size(), consumed.out());
        for (int i = 0; i < 20; i++) {
            assertEquals("Offset:" + i + "|key" + i + "|value " + i, lines.get(i).replace("\t", "|"));
        }
    }

    /** ConsumerGroupCommand --describe's rows: partition → [current offset, log end, lag]. */
    private static Map<Integer, long[]> describeGroup(String group, String topic) {
        Tool.Run d = tool(GROUP_COMMAND, "--describe", "--group", group).ok();
        Map<Integer, long[]> rows = new TreeMap<>();
        for (String line : d.lines()) {
            String[] f = line.split("\\s+");
            if (f.length >= 6 && f[0].equals(group) && f[1].equals(topic)) {
                rows.put(Integer.parseInt(f[2]), new long[] {
                        f[3].equals("-") ? -1 : Long.parseLong(f[3]),
                        Long.parseLong(f[4]),
                        f[5].equals("-") ? -1 : Long.parseLong(f[5])});
            }
        }
        return rows;
    }

    @Test
    void consumerGroupCommandListsDescribesResetsAndDeletes() {
        String topic = Weir.topic("tool-group", 2);
        Records.produce(topic, 2, 40);
        String group = Weir.unique("tool-group");
        tool(CONSOLE_CONSUMER, "--topic", topic, "--group", group, "--from-beginning", "--max-messages", "40",
                "--timeout-ms", "30000").ok();
        Weir.await(java.time.Duration.ofSeconds(30), "the group in --list",
                () -> tool(GROUP_COMMAND, "--list").lines().contains(group));

        Map<Integer, long[]> rows = describeGroup(group, topic);
        assertEquals(2, rows.size());
        for (long[] r : rows.values()) {
            assertEquals(20, r[0], "current offset");
            assertEquals(20, r[1], "log end offset");
            assertEquals(0, r[2], "lag");
        }
        Tool.Run state = tool(GROUP_COMMAND, "--describe", "--group", group, "--state").ok();
        assertTrue(state.out().contains("Empty"), state.out());

        Tool.Run plan = tool(GROUP_COMMAND, "--reset-offsets", "--group", group, "--topic", topic,
                "--to-offset", "5", "--execute").ok();
        assertTrue(plan.out().contains(topic), plan.out());
        rows = describeGroup(group, topic);
        for (long[] r : rows.values()) {
            assertEquals(5, r[0], "reset offset");
            assertEquals(15, r[2], "lag after the reset");
        }
        tool(GROUP_COMMAND, "--reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute").ok();
        describeGroup(group, topic).values().forEach(r -> assertEquals(0, r[0], "offset after --to-earliest"));

        Tool.Run deleted = tool(GROUP_COMMAND, "--delete", "--group", group).ok();
        assertTrue(deleted.out().contains("successful"), deleted.out());
        assertFalse(tool(GROUP_COMMAND, "--list").lines().contains(group));
    }

    @Test
    void configCommandAltersDescribesAndDeletesTopicConfigs() {
        String topic = Weir.topic("tool-config", 1);
        tool(CONFIG_COMMAND, "--entity-type", "topics", "--entity-name", topic, "--alter",
                "--add-config", "retention.ms=5000,max.message.bytes=300000").ok();
        Tool.Run d = tool(CONFIG_COMMAND, "--entity-type", "topics", "--entity-name", topic, "--describe").ok();
        assertTrue(d.out().contains("retention.ms=5000"), d.out());
        assertTrue(d.out().contains("max.message.bytes=300000"), d.out());
        tool(CONFIG_COMMAND, "--entity-type", "topics", "--entity-name", topic, "--alter",
                "--delete-config", "retention.ms").ok();
        d = tool(CONFIG_COMMAND, "--entity-type", "topics", "--entity-name", topic, "--describe").ok();
        assertFalse(d.out().contains("retention.ms=5000"), d.out());
        assertTrue(d.out().contains("max.message.bytes=300000"), d.out());
        Tool.Run bad = tool(CONFIG_COMMAND, "--entity-type", "topics", "--entity-name", topic, "--alter",
                "--add-config", "retention.ms=soon");
        assertNotEquals(0, bad.status(), "a value that is not a number is refused");
    }

    @Test
    void getOffsetShellAndDeleteRecordsCommandAgree() throws Exception {
        String topic = Weir.topic("tool-offsets", 2);
        Records.produce(topic, 2, 60);
        assertEquals(List.of(topic + ":0:30", topic + ":1:30"),
                tool("org.apache.kafka.tools.GetOffsetShell", "--topic", topic).ok().lines());
        Path plan = Files.createTempFile("delete-records", ".json");
        Files.writeString(plan, "{\"version\":1,\"partitions\":[{\"topic\":\"" + topic
                + "\",\"partition\":0,\"offset\":12}]}");
        Tool.Run deleted = tool("org.apache.kafka.tools.DeleteRecordsCommand", "--offset-json-file", plan.toString()).ok();
        assertTrue(deleted.out().contains("partition: " + topic + "-0\tlow_watermark: 12"), deleted.out());
        assertEquals(List.of(topic + ":0:12", topic + ":1:0"),
                tool("org.apache.kafka.tools.GetOffsetShell", "--topic", topic, "--time", "-2").ok().lines());
        Files.delete(plan);
    }

    @Test
    void producerAndConsumerPerformanceMoveEveryRecord() {
        String topic = Weir.topic("tool-perf", 4);
        List<String> args = new ArrayList<>(List.of("--topic", topic, "--num-records", "20000", "--record-size", "1024",
                "--throughput", "-1", "--command-property", "acks=all",
                "--bootstrap-server", Weir.bootstrap()));
        Tool.Run produced = Tool.run("org.apache.kafka.tools.ProducerPerformance",
                Tool.withConfig("--command-config", args.toArray(new String[0]))).ok();
        assertTrue(produced.out().contains("20000 records sent"), produced.out());
        Tool.Run consumed = tool("org.apache.kafka.tools.ConsumerPerformance", "--topic", topic,
                "--num-records", "20000", "--timeout", "60000").ok();
        // The summary: start, end, MB, MB/sec, messages, messages/sec, ...
        List<String> lines = consumed.lines();
        int header = lines.indexOf(lines.stream().filter(l -> l.startsWith("start.time")).findFirst()
                .orElseThrow(() -> new AssertionError(consumed.out())));
        String[] f = lines.get(header + 1).split(",\\s*");
        assertEquals(20000, Long.parseLong(f[4].strip()), consumed.out());
    }

    @Test
    void verifiableProducerAndConsumerAckAndConsumeEveryValue() {
        String topic = Weir.topic("tool-verifiable", 3);
        List<String> args = new ArrayList<>(List.of("--topic", topic, "--max-messages", "3000",
                "--acks", "-1", "--bootstrap-server", Weir.bootstrap()));
        Tool.Run produced = Tool.process(120, "org.apache.kafka.tools.VerifiableProducer",
                Tool.withConfig("--command-config", args.toArray(new String[0]))).ok();
        long acked = produced.lines().stream().filter(l -> l.contains("\"name\":\"producer_send_success\"")).count();
        assertEquals(3000, acked, "every value acknowledged");
        assertFalse(produced.out().contains("producer_send_error"), produced.out());

        String group = Weir.unique("verifiable");
        List<String> cargs = new ArrayList<>(List.of("--topic", topic, "--group-id", group, "--max-messages", "3000",
                "--bootstrap-server", Weir.bootstrap()));
        Tool.Run consumed = Tool.process(120, "org.apache.kafka.tools.VerifiableConsumer",
                Tool.withConfig("--command-config", cargs.toArray(new String[0]))).ok();
        long total = 0;
        Pattern count = Pattern.compile("\"name\":\"records_consumed\",\"count\":(\\d+)");
        for (String line : consumed.lines()) {
            Matcher m = count.matcher(line);
            if (m.find()) {
                total += Long.parseLong(m.group(1));
            }
        }
        assertEquals(3000, total, "every value consumed once");
        assertTrue(consumed.out().contains("\"name\":\"offsets_committed\""), consumed.out());
        assertFalse(consumed.out().contains("\"success\":false"), consumed.out());
    }

    @Test
    void logDirsCommandListsEveryReplicaWithItsSize() throws Exception {
        String topic = Weir.topic("tool-logdirs", 2);
        Records.produce(topic, 2, 100);
        Tool.Run run = tool("org.apache.kafka.tools.LogDirsCommand", "--describe", "--topic-list", topic).ok();
        String json = run.lines().stream().filter(l -> l.startsWith("{")).findFirst()
                .orElseThrow(() -> new AssertionError(run.out()));
        com.fasterxml.jackson.databind.JsonNode brokers =
                new com.fasterxml.jackson.databind.ObjectMapper().readTree(json).get("brokers");
        Map<String, Integer> replicas = new TreeMap<>();
        long bytes = 0;
        for (com.fasterxml.jackson.databind.JsonNode broker : brokers) {
            for (com.fasterxml.jackson.databind.JsonNode dir : broker.get("logDirs")) {
                assertTrue(dir.get("error").isNull(), json);
                for (com.fasterxml.jackson.databind.JsonNode p : dir.get("partitions")) {
                    replicas.merge(p.get("partition").asText(), 1, Integer::sum);
                    bytes += p.get("size").asLong();
                    assertEquals(0, p.get("offsetLag").asLong());
                }
            }
        }
        assertEquals(Map.of(topic + "-0", (int) Weir.rf(), topic + "-1", (int) Weir.rf()), replicas,
                "each partition once per replica: " + json);
        assertTrue(bytes >= 100L * Weir.rf() * 4, "the replicas hold the records: " + bytes + " bytes");
    }

    @Test
    void leaderElectionCommandFindsThePreferredReplicaLeadingAlready() throws Exception {
        String topic = Weir.topic("tool-election", 2);
        Tool.Run run = tool("org.apache.kafka.tools.LeaderElectionCommand", "--election-type", "preferred",
                "--topic", topic, "--partition", "1").ok();
        assertTrue(run.out().contains("Valid replica already elected for partitions " + topic + "-1"), run.out());
        Tool.Run unknown = tool("org.apache.kafka.tools.LeaderElectionCommand", "--election-type", "unclean",
                "--topic", topic, "--partition", "7");
        assertNotEquals(0, unknown.status(), unknown.out());
        assertTrue((unknown.out() + unknown.err()).contains("UnknownTopicOrPartitionException"),
                unknown.out() + unknown.err());
    }

    private static String[] quorumArgs() {
        List<String> args = new ArrayList<>(List.of(
                Tool.withConfig("--command-config", "--bootstrap-server", Weir.bootstrap())));
        args.addAll(List.of("describe", "--status"));
        return args.toArray(new String[0]);
    }

    @Test
    void reassignPartitionsListsNoMoveUnderwayOnAQuietCluster() {
        Tool.Run run = tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand", "--list");
        assertEquals(0, run.status(), run.out() + run.err());
        assertTrue(run.out().contains("No partition reassignments found"), run.out());
    }

    @Test
    void theQuorumToolDescribesTheControllerQuorumWithItsLeaderAmongTheVoters() {
        // Its options come before its subcommand.
        Tool.Run r = Tool.run("org.apache.kafka.tools.MetadataQuorumCommand", quorumArgs());
        assertEquals(0, r.status(), r.out() + r.err());
        java.util.regex.Matcher leader =
                java.util.regex.Pattern.compile("LeaderId:\\s+(\\d+)").matcher(r.out());
        assertTrue(leader.find(), r.out());
        assertTrue(r.out().contains("\"id\": " + leader.group(1)), "the leader votes: " + r.out());
        assertTrue(r.out().contains("MaxFollowerLag:"), r.out());
    }
}
