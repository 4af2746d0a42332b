//! EndTxn (v0–v3): commits or aborts the producer's open transaction at its
//! coordinator (`shard::txn_routing::end_txn`): decided durably, then marked on every
//! partition and group of the transaction.

use std::rc::Rc;

use kafka_protocol::{
    messages::{EndTxnRequest, EndTxnResponse},
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, error_code::fenced_before, Call, Handler, Reply};

/// EndTxn.
pub struct EndTxn;

impl Handler for EndTxn {
    type Request = EndTxnRequest;
    type Response = EndTxnResponse;

    fn errors(r: &EndTxnResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: EndTxnRequest,
    ) -> Reply<EndTxnResponse> {
        let id = req.transactional_id.0.as_str();
        let access = Access::of(&ctx, &call).await;
        let outcome = if access.transactional_id(Operation::Write, id) {
            ctx.end_txn(id, req.producer_id.0, req.producer_epoch, req.committed)
                .await
        } else {
            Err(ResponseError::TransactionalIdAuthorizationFailed)
        };
        let mut response = EndTxnResponse::default();
        response.error_code = outcome
            .err()
            .map_or(0, |e| fenced_before(e, call.version(), 2).code());
        Reply::Respond(response)
    }
}
