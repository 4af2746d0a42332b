//! The network side of a shard: its listener, one task pair per connection, and Kafka's
//! length-prefixed framing.

pub mod connection;
pub mod frame;
pub mod listener;
