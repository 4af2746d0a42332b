//! InitProducerId: hands an idempotent producer its id and epoch. A producer that
//! re-initialises with its id (v3+) gets the next epoch, fencing its older self.
//! A transactional producer asks its transaction coordinator, which keeps the id's
//! producer id across instances and bumps its epoch each time (`txn::coordinator`,
//! `Coordinator::init`).

use std::rc::Rc;

use kafka_protocol::{
    messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId},
    ResponseError,
};

use crate::{ids::ProducerIdentity, security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, error_code::fenced_before, Call, Handler, Reply};

/// InitProducerId for transactional id `id`, at its coordinator: the producer id and
/// the new epoch, durable before they are returned. An open transaction is aborted
/// first at a bumped epoch (fencing the producer that opened it); when that abort
/// cannot finish at once the client is told CONCURRENT_TRANSACTIONS and retries.
async fn init_transactional(
    ctx: &ShardContext,
    access: &Access,
    id: &str,
    req: &InitProducerIdRequest,
) -> Result<(i64, i16), ResponseError> {
    if id.is_empty() {
        return Err(ResponseError::InvalidRequest);
    }
    if !access.transactional_id(Operation::Write, id) {
        return Err(ResponseError::TransactionalIdAuthorizationFailed);
    }
    let expected = (req.producer_id.0 >= 0 && req.producer_epoch >= 0)
        .then(|| ProducerIdentity::new(req.producer_id.0, req.producer_epoch));
    let producer = ctx
        .txns
        .init(ctx, id, req.transaction_timeout_ms, expected)
        .await?;
    Ok((producer.id.0, producer.epoch.0))
}

/// Answers with a fresh producer id and epoch 0, or the next epoch of the given id.
pub struct InitProducerId;

impl Handler for InitProducerId {
    type Request = InitProducerIdRequest;
    type Response = InitProducerIdResponse;

    fn errors(r: &InitProducerIdResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: InitProducerIdRequest,
    ) -> Reply<InitProducerIdResponse> {
        let ctx: &ShardContext = &ctx;
        let mut response = InitProducerIdResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        // Kafka's rule: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
        let access = Access::of(ctx, &call).await;
        if !access.cluster(Operation::IdempotentWrite) && !access.some_topic(Operation::Write) {
            response.error_code = ResponseError::ClusterAuthorizationFailed.code();
            return Reply::Respond(response);
        }
        if let Some(id) = &req.transactional_id {
            let version = call.version();
            match init_transactional(ctx, &access, id.0.as_str(), &req).await {
                Ok((producer_id, epoch)) => {
                    response.producer_id = ProducerId(producer_id);
                    response.producer_epoch = epoch;
                }
                Err(e) => response.error_code = fenced_before(e, version, 4).code(),
            }
            return Reply::Respond(response);
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
        Reply::Respond(response)
    }
}
