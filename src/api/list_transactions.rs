//! ListTransactions (v0–v1): the transactional ids this shard coordinates, filtered by
//! state, producer id and (v1) how long the transaction has been open, as
//! `kafka-transactions.sh list` asks every node. Ids the caller may not DESCRIBE are
//! left out, as in Kafka.

use std::rc::Rc;

use kafka_protocol::messages::{
    list_transactions_response::TransactionState, ListTransactionsRequest,
    ListTransactionsResponse, ProducerId, TransactionalId,
};

use crate::{
    security::acl::Operation,
    shard::{context::ShardContext, txn_routing::now_ms},
    txn::state::TxnState,
};

use super::{authorize::Access, str_bytes, Call, Handler, Reply};

/// Kafka's state names, for telling unknown filters apart.
const STATES: [TxnState; 6] = [
    TxnState::Empty,
    TxnState::Ongoing,
    TxnState::PrepareCommit,
    TxnState::PrepareAbort,
    TxnState::CompleteCommit,
    TxnState::CompleteAbort,
];

/// ListTransactions.
pub struct ListTransactions;

impl Handler for ListTransactions {
    type Request = ListTransactionsRequest;
    type Response = ListTransactionsResponse;

    fn errors(r: &ListTransactionsResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: ListTransactionsRequest,
    ) -> Reply<ListTransactionsResponse> {
        let access = Access::of(&ctx, &call).await;
        ctx.resync().await;
        let mut response = ListTransactionsResponse::default();
        let known = |f: &str| STATES.iter().any(|s| s.kafka_name() == f);
        response.unknown_state_filters = req
            .state_filters
            .iter()
            .filter(|f| !known(f.as_str()))
            .cloned()
            .collect();
        let now = now_ms();
        for (id, meta) in ctx.txns.states().all() {
            let state = meta.state.kafka_name();
            let wanted = ctx.owns_group(&id)
                && access.transactional_id(Operation::Describe, &id)
                && (req.state_filters.is_empty()
                    || req.state_filters.iter().any(|f| f.as_str() == state))
                && (req.producer_id_filters.is_empty()
                    || req
                        .producer_id_filters
                        .contains(&ProducerId(meta.producer_id)))
                && (call.version() < 1
                    || req.duration_filter < 0
                    || (meta.started_ms >= 0 && now - meta.started_ms >= req.duration_filter));
            if wanted {
                let mut t = TransactionState::default();
                t.transactional_id = TransactionalId(str_bytes(&id));
                t.producer_id = ProducerId(meta.producer_id);
                t.transaction_state = str_bytes(state);
                response.transaction_states.push(t);
            }
        }
        Reply::Respond(response)
    }
}
