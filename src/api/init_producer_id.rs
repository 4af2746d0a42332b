//! InitProducerId: hands an idempotent producer its id and epoch. A producer that
//! re-initialises with its id (v3+) gets the next epoch, fencing its older self.
//! Transactions are not supported: a transactional id is refused.

use bytes::Bytes;
use kafka_protocol::{
    messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId},
    ResponseError,
};

use crate::shard::context::ShardContext;

use super::{decode_body, encode, Request};

/// Answers with a fresh producer id and epoch 0, or the next epoch of the given id.
pub async fn handle(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    let req: InitProducerIdRequest = decode_body(request)?;
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    if req.transactional_id.is_some() {
        tracing::info!("refusing a transactional producer: transactions are not supported");
        response.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return encode(request, request.version(), &response);
    }
    let bump =
        req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX - 1;
    if bump {
        response.producer_id = req.producer_id;
        response.producer_epoch = req.producer_epoch + 1;
    } else {
        match ctx.producer_ids.allocate().await {
            Ok(id) => {
                response.producer_id = ProducerId(id);
                response.producer_epoch = 0;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot allocate a producer id");
                response.error_code = ResponseError::UnknownServerError.code();
            }
        }
    }
    encode(request, request.version(), &response)
}
