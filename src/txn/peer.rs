//! Requests from a transaction's coordinator or a partition's leader to another weir
//! node (or another shard of this one): markers and enrolments. Connections are kept
//! open between requests, a few per node, so a transaction's end does not pay a TCP
//! handshake (and, where SASL is required, a login) every time.

use std::{cell::RefCell, collections::HashMap, time::Duration};

use futures_lite::future;
use kafka_protocol::protocol::Request;
use weir_client::{
    connection::{call, connect_with, RequestWriter, ResponseReader},
    dialer::Dialer,
};

/// Idle connections kept per node and client id; more are closed after their request.
pub const IDLE_PER_NODE: usize = 4;

/// An open connection to a node, between two requests.
type Idle = (RequestWriter, ResponseReader);

/// A shard's connections to its peers. `!Send`: one per shard.
pub struct Peers {
    dialer: Dialer,
    idle: RefCell<HashMap<(String, &'static str), Vec<Idle>>>,
}

impl Peers {
    /// Peers reached through `dialer`.
    pub fn new(dialer: Dialer) -> Peers {
        Peers {
            dialer,
            idle: RefCell::new(HashMap::new()),
        }
    }

    /// Sends `request` at `version` to the node at `addr` and returns its answer, or why
    /// there is none (unreachable, refused, or no answer within `timeout`).
    ///
    /// A kept connection is tried first; when it fails (the node restarted or closed
    /// it), the request goes again over a fresh one, so `request` must be safe to
    /// repeat. A connection is kept only after a whole exchange succeeded: one cut off
    /// by the timeout, mid-request, is dropped.
    pub async fn ask<R: Request>(
        &self,
        addr: &str,
        client_id: &'static str,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response, String> {
        let exchange = async {
            let key = (addr.to_string(), client_id);
            let kept = self.idle.borrow_mut().get_mut(&key).and_then(Vec::pop);
            if let Some((mut writer, mut reader)) = kept {
                if let Ok(answer) = call(&mut writer, &mut reader, request, version).await {
                    self.keep(key, (writer, reader));
                    return Ok(answer);
                }
            }
            let (mut writer, mut reader) = connect_with(&self.dialer, addr, client_id)
                .await
                .map_err(|e| e.to_string())?;
            let answer = call(&mut writer, &mut reader, request, version)
                .await
                .map_err(|e| e.to_string())?;
            self.keep(key, (writer, reader));
            Ok(answer)
        };
        future::or(async { Some(exchange.await) }, async {
            glommio::timer::sleep(timeout).await;
            None
        })
        .await
        .unwrap_or_else(|| Err(format!("no answer in {} s", timeout.as_secs())))
    }

    fn keep(&self, key: (String, &'static str), connection: Idle) {
        let mut idle = self.idle.borrow_mut();
        let kept = idle.entry(key).or_default();
        if kept.len() < IDLE_PER_NODE {
            kept.push(connection);
        }
    }
}
