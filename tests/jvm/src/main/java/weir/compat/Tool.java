package weir.compat;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs one of Kafka's command-line tools the way its shell wrapper does
 * ({@code kafka-run-class.sh CLASS ARGS}: the class's {@code main} with the same
 * arguments), inside this JVM so that many runs share one start-up: standard input, output
 * and error are the test's, and the tool's {@code Exit.exit} ends the run with its status
 * instead of the JVM.
 */
public final class Tool {
    private Tool() {}

    /** What a tool run printed and the status it exited with. */
    public record Run(int status, String out, String err) {
        /** The output's lines, without empty ones. */
        public List<String> lines() {
            List<String> l = new ArrayList<>();
            for (String s : out.split("\n")) {
                if (!s.isBlank()) {
                    l.add(s.strip());
                }
            }
            return l;
        }

        /** Fails unless the tool exited with 0. */
        public Run ok() {
            if (status != 0) {
                throw new AssertionError("exit " + status + "\nout:\n" + out + "\nerr:\n" + err);
            }
            return this;
        }
    }

    private static final class ToolExit extends RuntimeException {
        private static final long serialVersionUID = 1L;

        ToolExit(int status) {
            super("exit " + status, null, false, false);
        }
    }

    /** Runs {@code main} of {@code tool} with {@code args} and no input. */
    public static Run run(String tool, String... args) {
        return runWithInput(tool, "", args);
    }

    /**
     * Runs {@code main} of {@code tool} with {@code args} and {@code input} on standard
     * input.
     */
    public static synchronized Run runWithInput(String tool, String input, String... args) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        InputStream in = System.in;
        ByteArrayOutputStream outBytes = new ByteArrayOutputStream();
        ByteArrayOutputStream errBytes = new ByteArrayOutputStream();
        // A real process ends at its first exit, with that status, and then runs the
        // shutdown hooks the tool added (some tools print their summary from one).
        int[] firstExit = {Integer.MIN_VALUE};
        List<Runnable> hooks = new ArrayList<>();
        int status = 0;
        Exit.setExitProcedure((code, message) -> {
            if (firstExit[0] == Integer.MIN_VALUE) {
                firstExit[0] = code;
            }
            throw new ToolExit(code);
        });
        Exit.setShutdownHookAdder((name, hook) -> hooks.add(hook));
        try {
            System.setOut(new PrintStream(outBytes, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(errBytes, true, StandardCharsets.UTF_8));
            System.setIn(new ByteArrayInputStream(input.getBytes(StandardCharsets.UTF_8)));
            Class.forName(tool).getMethod("main", String[].class).invoke(null, (Object) args);
        } catch (InvocationTargetException e) {
            if (!(e.getCause() instanceof ToolExit)) {
                e.getCause().printStackTrace(System.err);
                status = -1;
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("no main in " + tool, e);
        } finally {
            hooks.forEach(Runnable::run);
            System.out.flush();
            System.err.flush();
            System.setOut(out);
            System.setErr(err);
            System.setIn(in);
            Exit.resetExitProcedure();
            Exit.resetShutdownHookAdder();
        }
        if (firstExit[0] != Integer.MIN_VALUE) {
            status = firstExit[0];
        }
        Run run = new Run(status, outBytes.toString(StandardCharsets.UTF_8), errBytes.toString(StandardCharsets.UTF_8));
        System.out.println("$ " + tool.substring(tool.lastIndexOf('.') + 1) + " " + String.join(" ", Arrays.asList(args))
                + "  -> exit " + status);
        return run;
    }

    /**
     * Runs {@code tool} in a JVM of its own, exactly as {@code kafka-run-class.sh} does
     * ({@code java -cp CLASSPATH CLASS ARGS}, with this JVM's class path): for the tools
     * that print from a JVM shutdown hook, which only a real exit runs. At most
     * {@code seconds}; the child is killed past that.
     */
    public static Run process(int seconds, String tool, String... args) {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path"), tool));
        command.addAll(Arrays.asList(args));
        try {
            Path out = Files.createTempFile("tool", ".out");
            Path err = Files.createTempFile("tool", ".err");
            Process p = new ProcessBuilder(command).redirectOutput(out.toFile()).redirectError(err.toFile()).start();
            boolean ended = p.waitFor(seconds, TimeUnit.SECONDS);
            if (!ended) {
                p.destroyForcibly().waitFor();
            }
            Run run = new Run(ended ? p.exitValue() : -1, Files.readString(out), Files.readString(err));
            Files.delete(out);
            Files.delete(err);
            System.out.println("$ java -cp ... " + tool + " " + String.join(" ", args) + "  -> exit " + run.status());
            return run;
        } catch (IOException e) {
            throw new UncheckedIOException("run " + tool, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted running " + tool, e);
        }
    }

    /** {@code args} followed by {@code flag FILE} when the run has a security settings file. */
    public static String[] withConfig(String flag, String... args) {
        String file = Weir.clientConfigFile();
        if (file == null) {
            return args;
        }
        String[] all = Arrays.copyOf(args, args.length + 2);
        all[args.length] = flag;
        all[args.length + 1] = file;
        return all;
    }
}
