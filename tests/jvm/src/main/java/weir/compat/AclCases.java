package weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.junit.jupiter.api.Test;

/**
 * ACLs over SASL_SSL (run only against a weir with {@code --authorizer acl}, the cases
 * logged in as a super user): the AdminClient and AclCommand create, list and delete
 * them, and a user the ACLs name may write exactly when they allow it.
 */
class AclCases {

    /** A producer logged in as {@code user} with SCRAM-SHA-512, otherwise like the run's. */
    private static KafkaProducer<String, String> producerAs(String user, String password) {
        Properties extra = new Properties();
        extra.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        extra.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "10000");
        extra.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "15000");
        extra.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        return Records.producer(extra);
    }

    private static AclBindingFilter onTopic(String topic) {
        return new AclBindingFilter(new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL),
                AccessControlEntryFilter.ANY);
    }

    @Test
    void adminClientAclsDecideWhatAUserMayWrite() throws Exception {
        String topic = Weir.topic("acl-admin", 1);
        String user = Weir.unique("writer");
        AclBinding write = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntry("User:" + user, "*", AclOperation.WRITE, AclPermissionType.ALLOW));
        AclBinding describe = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntry("User:" + user, "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW));
        try (Admin admin = Weir.admin()) {
            admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "pw-" + user))).all().get();
            try (KafkaProducer<String, String> p = producerAs(user, "pw-" + user)) {
                ExecutionException e = assertThrows(ExecutionException.class,
                        () -> p.send(new ProducerRecord<>(topic, 0, "k", "refused")).get());
                assertInstanceOf(TopicAuthorizationException.class, e.getCause(), e.toString());
            }
            admin.createAcls(List.of(write, describe)).all().get();
            Collection<AclBinding> listed = admin.describeAcls(onTopic(topic)).values().get();
            assertEquals(2, listed.size(), listed.toString());
            assertTrue(listed.contains(write));
            try (KafkaProducer<String, String> p = producerAs(user, "pw-" + user)) {
                assertEquals(0, p.send(new ProducerRecord<>(topic, 0, "k", "allowed")).get().offset());
            }
            Collection<AclBinding> deleted = admin.deleteAcls(List.of(onTopic(topic))).all().get();
            assertEquals(2, deleted.size());
            assertTrue(admin.describeAcls(onTopic(topic)).values().get().isEmpty());
        }
    }

    @Test
    void aclCommandAddsListsAndRemoves() {
        String topic = Weir.topic("acl-tool", 1);
        String group = Weir.unique("acl-tool-group");
        String[] base = {"--bootstrap-server", Weir.bootstrap()};
        Tool.run("org.apache.kafka.tools.AclCommand", Tool.withConfig("--command-config", concat(base,
                "--add", "--allow-principal", "User:carol", "--operation", "Read", "--operation", "Describe",
                "--topic", topic, "--group", group))).ok();
        Tool.Run listed = Tool.run("org.apache.kafka.tools.AclCommand", Tool.withConfig("--command-config",
                concat(base, "--list", "--topic", topic))).ok();
        assertTrue(listed.out().contains("principal=User:carol"), listed.out());
        assertTrue(listed.out().contains("operation=READ"), listed.out());
        assertTrue(listed.out().contains("operation=DESCRIBE"), listed.out());
        Tool.run("org.apache.kafka.tools.AclCommand", Tool.withConfig("--command-config", concat(base,
                "--remove", "--force", "--allow-principal", "User:carol", "--operation", "Read",
                "--operation", "Describe", "--topic", topic, "--group", group))).ok();
        Tool.Run after = Tool.run("org.apache.kafka.tools.AclCommand", Tool.withConfig("--command-config",
                concat(base, "--list", "--topic", topic))).ok();
        assertTrue(!after.out().contains("User:carol"), after.out());
    }

    private static String[] concat(String[] a, String... b) {
        String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }
}
