//! InitProducerId: hands an idempotent producer its id and epoch. A producer that
//! re-initialises with its id (v3+) gets the next epoch, fencing its older self.
//! Transactions are not supported: a transactional id is refused.

use std::rc::Rc;

use kafka_protocol::{
    messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId},
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, Call, Handler, Reply};

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
        if req.transactional_id.is_some() {
            tracing::info!("refusing a transactional producer: transactions are not supported");
            response.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
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
