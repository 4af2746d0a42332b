//! Consumer groups. So far: the committed-offset store ([`offset_store`]); the
//! coordinator's state machine and its APIs build on it.

pub mod coordinator;
pub mod offset_store;
