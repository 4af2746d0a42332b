package weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Kafka Connect 4.4 moves a file through a weir topic and back: a worker whose config,
 * offsets and status topics live on weir (distributed mode: standalone keeps its offsets
 * in a local file), connectors created over its REST API, and a restarted worker that
 * resumes from the offsets weir kept.
 */
class ConnectCases {
    private static final HttpClient HTTP = HttpClient.newHttpClient();

    private static Connect<?> startWorker(String group) {
        Map<String, String> w = new HashMap<>();
        // The worker's own clients and the producers, consumers and admins it makes for
        // connectors each take the security settings.
        Weir.props().forEach((k, v) -> {
            for (String prefix : List.of("", "producer.", "consumer.", "admin.")) {
                w.put(prefix + k, v.toString());
            }
        });
        w.put("group.id", group);
        w.put("config.storage.topic", group + "-configs");
        w.put("offset.storage.topic", group + "-offsets");
        w.put("status.storage.topic", group + "-status");
        for (String t : List.of("config", "offset", "status")) {
            w.put(t + ".storage.replication.factor", Short.toString(Weir.rf()));
        }
        w.put("offset.storage.partitions", "5");
        w.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        w.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        w.put("listeners", "http://127.0.0.1:0");
        w.put("offset.flush.interval.ms", "200");
        w.put("plugin.discovery", "only_scan");
        return new ConnectDistributed().startConnect(w);
    }

    private static String rest(Connect<?> connect, String method, String path, String body) {
        URI uri = connect.rest().serverUrl().resolve(path);
        HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30))
                .header("Content-Type", "application/json");
        b = body == null ? b.method(method, HttpRequest.BodyPublishers.noBody())
                : b.method(method, HttpRequest.BodyPublishers.ofString(body));
        try {
            HttpResponse<String> r = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() >= 300) {
                throw new AssertionError(method + " " + path + " -> " + r.statusCode() + ": " + r.body());
            }
            return r.body();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    private static List<String> lines(Path file) {
        try {
            return Files.exists(file) ? Files.readAllLines(file) : List.of();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void appendLines(Path file, int from, int to) throws IOException {
        StringBuilder b = new StringBuilder();
        for (int i = from; i < to; i++) {
            b.append("line ").append(i).append('\n');
        }
        Files.writeString(file, b, java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND);
    }

    private static List<String> expectedLines(int count) {
        List<String> l = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            l.add("line " + i);
        }
        return l;
    }

    @Test
    void aFileMovesThroughWeirAndBackAndAWorkerRestartResumes(@TempDir Path dir) throws Exception {
        String group = Weir.unique("connect");
        String topic = Weir.topic("connect-lines", 1);
        Path in = dir.resolve("in.txt");
        Path out = dir.resolve("out.txt");
        appendLines(in, 0, 500);
        String sink = group + "-sink";
        Connect<?> connect = startWorker(group);
        try {
            rest(connect, "POST", "/connectors", "{\"name\":\"" + group + "-source\",\"config\":{\"connector.class\":\""
                    + LineFileSource.class.getName() + "\",\"tasks.max\":\"1\",\"file\":\"" + in
                    + "\",\"topic\":\"" + topic + "\"}}");
            rest(connect, "POST", "/connectors", "{\"name\":\"" + sink + "\",\"config\":{\"connector.class\":\""
                    + LineFileSink.class.getName() + "\",\"tasks.max\":\"1\",\"file\":\"" + out
                    + "\",\"topics\":\"" + topic + "\"}}");
            Weir.await(Duration.ofSeconds(90), "500 lines through weir", () -> lines(out).size() >= 500);
            assertEquals(expectedLines(500), lines(out));
            String status = rest(connect, "GET", "/connectors/" + sink + "/status", null);
            assertTrue(status.contains("\"state\":\"RUNNING\""), status);
        } finally {
            connect.stop();
            connect.awaitStop();
        }
        // The sink's group committed its progress on weir.
        try (Admin admin = Weir.admin()) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets("connect-" + sink).partitionsToOffsetAndMetadata().get();
            assertEquals(500, committed.get(new TopicPartition(topic, 0)).offset());
        }
        // A new worker reads the connectors from the config topic and the source's
        // position from the offsets topic: only the new lines move.
        appendLines(in, 500, 600);
        Connect<?> again = startWorker(group);
        try {
            Weir.await(Duration.ofSeconds(90), "600 lines through weir", () -> lines(out).size() >= 600);
            assertEquals(expectedLines(600), lines(out));
            assertEquals(600, Records.read(List.of(new TopicPartition(topic, 0)), 0, 600).size());
            Thread.sleep(1000);
            assertEquals(600, lines(out).size(), "no line twice");
        } finally {
            again.stop();
            again.awaitStop();
        }
    }
}
