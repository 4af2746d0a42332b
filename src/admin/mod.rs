//! `weir topics …` and `weir groups …`: operator commands that speak the Kafka protocol
//! to a running broker, as Kafka's own tools do. Blocking, one request at a time, over
//! `weir_client::blocking`.

pub mod commands;
