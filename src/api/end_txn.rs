//! EndTxn (v0–v5): commits or aborts the producer's open transaction at its
//! coordinator (`shard::txn_routing::end_txn`): decided durably, then marked on every
//! partition and group of the transaction. v5 speaks transactions V2 (KIP-890 part 2):
//! the epoch is bumped by every transaction, and the answer carries the producer id and
//! epoch of the next one.

use std::rc::Rc;

use kafka_protocol::{
    messages::{EndTxnRequest, EndTxnResponse},
    ResponseError,
};

use crate::{
    ids::ProducerIdentity, security::acl::Operation, shard::context::ShardContext,
    txn::state::TxnProtocol,
};

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
        let protocol = if call.version() >= 5 {
            TxnProtocol::V2
        } else {
            TxnProtocol::V1
        };
        let outcome = if access.transactional_id(Operation::Write, id) {
            ctx.txns
                .end(
                    &ctx,
                    id,
                    ProducerIdentity::new(req.producer_id.0, req.producer_epoch),
                    req.committed,
                    protocol,
                )
                .await
        } else {
            Err(ResponseError::TransactionalIdAuthorizationFailed)
        };
        let mut response = EndTxnResponse::default();
        match outcome {
            Ok(next) => {
                response.producer_id = next.id.0.into();
                response.producer_epoch = next.epoch.0;
            }
            Err(e) => {
                response.error_code = fenced_before(e, call.version(), 2).code();
                response.producer_id = (-1).into();
                response.producer_epoch = -1;
            }
        }
        Reply::Respond(response)
    }
}
