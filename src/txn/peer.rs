//! One request from a transaction's coordinator or a partition's leader to another
//! weir node, over a connection of its own, given up after a timeout.

use std::time::Duration;

use futures_lite::future;
use kafka_protocol::protocol::Request;
use weir_client::{
    connection::{call, connect_with},
    dialer::Dialer,
};

/// Sends `request` at `version` to the node at `addr` and returns its answer, or why
/// there is none (unreachable, refused, or no answer within `timeout`).
pub async fn ask<R: Request>(
    dialer: &Dialer,
    addr: &str,
    client_id: &'static str,
    request: &R,
    version: i16,
    timeout: Duration,
) -> Result<R::Response, String> {
    let exchange = async {
        let (mut writer, mut reader) = connect_with(dialer, addr, client_id)
            .await
            .map_err(|e| e.to_string())?;
        call(&mut writer, &mut reader, request, version)
            .await
            .map_err(|e| e.to_string())
    };
    future::or(async { Some(exchange.await) }, async {
        glommio::timer::sleep(timeout).await;
        None
    })
    .await
    .unwrap_or_else(|| Err(format!("no answer in {} s", timeout.as_secs())))
}
