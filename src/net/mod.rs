//! The network side of a shard: its listeners (plaintext, and TLS when configured), one
//! task pair per connection, and Kafka's length-prefixed framing.

pub mod connection;
pub mod deadline;
pub mod frame;
pub mod listener;
