//! AddOffsetsToTxn (v0–v3): enrols a consumer group in the producer's open transaction,
//! so the coordinator's marker reaches the group's coordinator and commits (or drops)
//! the offsets the producer sends it with TxnOffsetCommit.

use std::rc::Rc;

use kafka_protocol::{
    messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse},
    ResponseError,
};

use crate::{
    ids::ProducerIdentity, security::acl::Operation, shard::context::ShardContext,
    txn::coordinator::EnrolWait,
};

use super::{authorize::Access, error_code::fenced_before, Call, Handler, Reply};

/// AddOffsetsToTxn.
pub struct AddOffsetsToTxn;

impl Handler for AddOffsetsToTxn {
    type Request = AddOffsetsToTxnRequest;
    type Response = AddOffsetsToTxnResponse;

    fn errors(r: &AddOffsetsToTxnResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: AddOffsetsToTxnRequest,
    ) -> Reply<AddOffsetsToTxnResponse> {
        let id = req.transactional_id.0.as_str();
        let group = req.group_id.0.as_str();
        let access = Access::of(&ctx, &call).await;
        let outcome = if !access.transactional_id(Operation::Write, id) {
            Err(ResponseError::TransactionalIdAuthorizationFailed)
        } else if !access.group(Operation::Read, group) {
            Err(ResponseError::GroupAuthorizationFailed)
        } else {
            ctx.txns
                .add(
                    &*ctx,
                    id,
                    ProducerIdentity::new(req.producer_id.0, req.producer_epoch),
                    &[],
                    &[group.to_string()],
                    EnrolWait::Durable,
                )
                .await
        };
        let mut response = AddOffsetsToTxnResponse::default();
        response.error_code = outcome
            .err()
            .map_or(0, |e| fenced_before(e, call.version(), 2).code());
        Reply::Respond(response)
    }
}
