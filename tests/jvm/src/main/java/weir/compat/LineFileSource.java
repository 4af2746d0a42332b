package weir.compat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * A source connector of the test's own (Kafka's FileStream connectors are not served
 * here): each line of {@code file} becomes a record of {@code topic}; the source offset is
 * the number of lines sent, so a restarted worker resumes where Connect's offsets topic says.
 */
public class LineFileSource extends SourceConnector {
    private Map<String, String> config;

    @Override public void start(Map<String, String> props) {
        config = Map.copyOf(props);
    }

    @Override public Class<? extends Task> taskClass() {
        return LineTask.class;
    }

    @Override public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(config);
    }

    @Override public void stop() {}

    @Override public ConfigDef config() {
        return new ConfigDef()
                .define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the file read")
                .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the topic written");
    }

    @Override public String version() {
        return "1";
    }

    /** Reads the file's lines past the committed offset. */
    public static class LineTask extends SourceTask {
        private Path file;
        private String topic;
        private long sent;

        @Override public String version() {
            return "1";
        }

        @Override public void start(Map<String, String> props) {
            file = Path.of(props.get("file"));
            topic = props.get("topic");
            Map<String, Object> offset = context.offsetStorageReader().offset(Map.of("file", file.toString()));
            sent = offset == null ? 0 : ((Number) offset.get("line")).longValue();
        }

        @Override public List<SourceRecord> poll() throws InterruptedException {
            List<String> lines;
            try {
                lines = Files.readAllLines(file);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            List<SourceRecord> out = new ArrayList<>();
            while (sent < lines.size() && out.size() < 100) {
                String line = lines.get((int) sent);
                sent++;
                out.add(new SourceRecord(Map.of("file", file.toString()), Map.of("line", sent), topic, null,
                        null, null, Schema.STRING_SCHEMA, line));
            }
            if (out.isEmpty()) {
                Thread.sleep(100);
            }
            return out;
        }

        @Override public void stop() {}
    }
}
