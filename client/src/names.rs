//! Kafka's strings and names from plain ones, for building requests and responses.

use kafka_protocol::{messages::TopicName, protocol::StrBytes};

/// A Kafka string from a plain one.
pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A Kafka topic name from a plain string.
pub fn topic_name(name: &str) -> TopicName {
    TopicName(str_bytes(name))
}
