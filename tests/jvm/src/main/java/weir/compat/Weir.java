package weir.compat;

import java.io.FileReader;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;

/**
 * What the cases know of the weir they run against, from system properties the Rust test
 * that started it sets: {@code weir.bootstrap} (host:port list), {@code weir.rf} (the
 * replication factor topics get: 1 on one host, 3 on the cluster) and, for a secured
 * listener, {@code weir.client.config} (a properties file of security settings every
 * client and tool gets, as a user passes {@code --command-config}).
 */
public final class Weir {
    private Weir() {}

    /** The bootstrap servers. */
    public static String bootstrap() {
        String b = System.getProperty("weir.bootstrap");
        if (b == null || b.isEmpty()) {
            throw new IllegalStateException("-Dweir.bootstrap=HOST:PORT is not set");
        }
        return b;
    }

    /** The replication factor new topics get. */
    public static short rf() {
        return Short.parseShort(System.getProperty("weir.rf", "1"));
    }

    /** The security settings file, or null on plaintext. */
    public static String clientConfigFile() {
        String f = System.getProperty("weir.client.config");
        return f == null || f.isEmpty() ? null : f;
    }

    /** Bootstrap plus the security settings: the base of every client's configuration. */
    public static Properties props() {
        Properties p = new Properties();
        String file = clientConfigFile();
        if (file != null) {
            try (FileReader r = new FileReader(file)) {
                p.load(r);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        return p;
    }

    /** A name no other case uses. */
    public static String unique(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    /** An admin client with {@link #props()}. */
    public static Admin admin() {
        return Admin.create(props());
    }

    /** Creates a topic with the run's replication factor and waits until it is known. */
    public static String topic(String prefix, int partitions) {
        String name = unique(prefix);
        try (Admin admin = admin()) {
            admin.createTopics(java.util.List.of(new NewTopic(name, partitions, rf()))).all().get();
        } catch (InterruptedException | ExecutionException e) {
            throw new IllegalStateException("create topic " + name, e);
        }
        return name;
    }

    /** Waits up to {@code within} for {@code done}, failing with {@code what}. */
    public static void await(Duration within, String what, BooleanSupplier done) {
        long deadline = System.nanoTime() + within.toNanos();
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + within + ": " + what);
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted waiting for " + what, e);
            }
        }
    }
}
