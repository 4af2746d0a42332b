package weir.compat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Collection;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/** A sink connector of the test's own: appends each record's value to {@code file} as a line. */
public class LineFileSink extends SinkConnector {
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
                .define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the file appended to");
    }

    @Override public String version() {
        return "1";
    }

    /** Appends values in the order the task receives them. */
    public static class LineTask extends SinkTask {
        private Path file;

        @Override public String version() {
            return "1";
        }

        @Override public void start(Map<String, String> props) {
            file = Path.of(props.get("file"));
        }

        @Override public void put(Collection<SinkRecord> records) {
            StringBuilder text = new StringBuilder();
            for (SinkRecord r : records) {
                text.append(r.value()).append('\n');
            }
            try {
                Files.writeString(file, text, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override public void stop() {}
    }
}
