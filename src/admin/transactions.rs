//! `weir transactions`: the transactions of a running cluster over Kafka's own admin
//! APIs, as `kafka-transactions.sh` uses them — ListTransactions on every broker,
//! DescribeTransactions at an id's coordinator — and aborting an id's open transaction
//! the way a new producer instance does: InitProducerId with the id, which aborts it at
//! a bumped epoch and so fences the producer that left it open.

use std::time::{SystemTime, UNIX_EPOCH};

use kafka_protocol::{
    messages::{
        DescribeTransactionsRequest, FindCoordinatorRequest, InitProducerIdRequest,
        ListTransactionsRequest, ProducerId, TransactionalId,
    },
    protocol::StrBytes,
    ResponseError,
};

use super::commands::{check, with_coordinator_retries, Admin, AdminError, Result};

fn id_of(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

impl Admin {
    /// `transactions list`: every transactional id with its producer id and state.
    pub fn transactions_list(&mut self) -> Result<String> {
        let mut rows = Vec::new();
        for node in self.broker_ids() {
            let mut request = ListTransactionsRequest::default();
            request.duration_filter = -1;
            let answer = self.node(node)?.call(&request, 1)?;
            check(
                answer.error_code,
                format!("list transactions on broker {node}"),
            )?;
            for t in answer.transaction_states {
                rows.push((
                    t.transactional_id.0.to_string(),
                    t.producer_id.0,
                    t.transaction_state.to_string(),
                    node,
                ));
            }
        }
        rows.sort();
        let mut out = String::from("TRANSACTIONAL-ID\tPRODUCER-ID\tSTATE\tCOORDINATOR\n");
        for (id, producer, state, node) in rows {
            out.push_str(&format!("{id}\t{producer}\t{state}\t{node}\n"));
        }
        Ok(out)
    }

    fn txn_coordinator(&mut self, id: &str) -> Result<i32> {
        let mut request = FindCoordinatorRequest::default();
        request.key = StrBytes::from_string(id.to_string());
        request.key_type = 1;
        let answer = self.bootstrap().call(&request, 3)?;
        check(answer.error_code, format!("find the coordinator of {id}"))?;
        Ok(answer.node_id.0)
    }

    /// `transactions describe ID`: state, producer id and epoch, timeout, how long the
    /// open transaction has run, and its partitions.
    pub fn transactions_describe(&mut self, id: &str) -> Result<String> {
        let mut request = DescribeTransactionsRequest::default();
        request.transactional_ids = vec![id_of(id)];
        let (node, t) = with_coordinator_retries(|| {
            // Asked on every try: after NOT_COORDINATOR the id may have moved.
            let node = self.txn_coordinator(id)?;
            let answer = self.node(node)?.call(&request, 0)?;
            let t = answer
                .transaction_states
                .into_iter()
                .next()
                .ok_or_else(|| AdminError::Refused("empty DescribeTransactions answer".into()))?;
            check(t.error_code, format!("describe transactional id {id}"))?;
            Ok((node, t))
        })?;
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let age = if t.transaction_start_time_ms >= 0 {
            format!(
                "{:.1} s",
                (now_ms - t.transaction_start_time_ms) as f64 / 1000.0
            )
        } else {
            "-".into()
        };
        let partitions: Vec<String> = t
            .topics
            .iter()
            .flat_map(|d| {
                d.partitions
                    .iter()
                    .map(move |p| format!("{}-{p}", d.topic.0.as_str()))
            })
            .collect();
        Ok(format!(
            "transactional id {id}: {}, producer id {} epoch {}, timeout {} ms, open for {age}, coordinator {node}\npartitions: {}\n",
            t.transaction_state.as_str(),
            t.producer_id.0,
            t.producer_epoch,
            t.transaction_timeout_ms,
            if partitions.is_empty() { "-".to_string() } else { partitions.join(",") }
        ))
    }

    /// `transactions abort ID`: aborts the id's open transaction as a new instance of
    /// its producer would (InitProducerId), fencing the instance that opened it.
    pub fn transactions_abort(&mut self, id: &str) -> Result<String> {
        let node = self.txn_coordinator(id)?;
        let mut request = InitProducerIdRequest::default();
        request.transactional_id = Some(id_of(id));
        request.transaction_timeout_ms = 60_000;
        request.producer_id = ProducerId(-1);
        request.producer_epoch = -1;
        for _ in 0..100 {
            let answer = self.node(node)?.call(&request, 4)?;
            if answer.error_code == ResponseError::ConcurrentTransactions.code() {
                std::thread::sleep(std::time::Duration::from_millis(100));
                continue;
            }
            check(answer.error_code, format!("abort the transaction of {id}"))?;
            return Ok(format!(
                "transactional id {id}: any open transaction aborted; producer id {} is at epoch {} (its earlier instances are fenced)\n",
                answer.producer_id.0, answer.producer_epoch
            ));
        }
        Err(AdminError::Refused(format!(
            "the transaction of {id} was still completing after 10 s"
        )))
    }
}
