//! A producer stream's identity towards the broker: the producer id an idempotent or
//! transactional stream numbers its batches under, and for a transactional one the
//! connection to its transaction coordinator, over which it opens transactions
//! (AddPartitionsToTxn) and ends them (EndTxn), as Kafka's producer does. Where the
//! coordinator finalizes `transaction.version` 2 the stream speaks transactions V2
//! (KIP-890 part 2), as Kafka's 4.x producer does: no AddPartitionsToTxn (the leaders
//! enrol partitions on Produce v12), and each EndTxn answers the epoch, or the producer
//! id, the next transaction's batches carry.

use std::time::Duration;

use kafka_protocol::{
    messages::{
        add_partitions_to_txn_request::AddPartitionsToTxnTopic, AddPartitionsToTxnRequest, ApiKey,
        ApiVersionsRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
        ProducerId, TopicName, TransactionalId,
    },
    protocol::StrBytes,
    ResponseError,
};
use weir_client::{
    connection::{call, connect_with, RequestWriter, ResponseReader},
    dialer::Dialer,
};

use crate::accumulator::TxnPlan;

/// The versions spoken: those of Kafka's transactions V1, which every broker serves.
const INIT_PRODUCER_ID_VERSION: i16 = 4;
const ADD_PARTITIONS_VERSION: i16 = 3;
const END_TXN_VERSION: i16 = 3;
const FIND_COORDINATOR_VERSION: i16 = 3;
/// Transactions V2's EndTxn, which answers the next transaction's producer id and epoch.
const END_TXN_V2_VERSION: i16 = 5;
/// Transactions V2's Produce: the leader enrols the partitions of a transaction.
pub const PRODUCE_V2_VERSION: i16 = 12;

/// How often a call answered with a retriable error is tried before the run fails.
const TRIES: u32 = 100;
/// The pause between tries.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Errors a call is retried on: the coordinator is moving or still completing the
/// previous transaction.
fn retriable(code: i16) -> bool {
    [
        ResponseError::CoordinatorNotAvailable,
        ResponseError::NotCoordinator,
        ResponseError::CoordinatorLoadInProgress,
        ResponseError::ConcurrentTransactions,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// Takes a producer id for an idempotent stream over its leader connection.
pub async fn idempotent_id(
    writer: &mut RequestWriter,
    reader: &mut ResponseReader,
) -> Result<(i64, i16), String> {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = None;
    request.producer_id = ProducerId(-1);
    request.producer_epoch = -1;
    request.transaction_timeout_ms = -1;
    for _ in 0..TRIES {
        let answer = call(writer, reader, &request, INIT_PRODUCER_ID_VERSION)
            .await
            .map_err(|e| format!("InitProducerId: {e}"))?;
        match ResponseError::try_from_code(answer.error_code) {
            None => return Ok((answer.producer_id.0, answer.producer_epoch)),
            Some(_) if retriable(answer.error_code) => glommio::timer::sleep(RETRY_PAUSE).await,
            Some(e) => return Err(format!("InitProducerId: {e:?}")),
        }
    }
    Err(format!("InitProducerId: still refused after {TRIES} tries"))
}

/// Whether transaction number `n` (from 0) commits when `abort_ratio` of them abort:
/// one abort each time the running count of aborts due passes a whole number.
fn commits(n: u64, abort_ratio: f64) -> bool {
    let n = n as f64;
    (n * abort_ratio).floor() == ((n + 1.0) * abort_ratio).floor()
}

/// A transactional stream's coordinator session.
pub struct Transactions {
    writer: RequestWriter,
    reader: ResponseReader,
    /// The transactional id, which the stream's Produce requests carry.
    pub id: TransactionalId,
    /// The producer id and epoch the stream's batches carry.
    pub producer: (i64, i16),
    topic: TopicName,
    partitions: Vec<i32>,
    /// Messages per transaction.
    pub size: u64,
    abort_ratio: f64,
    ended: u64,
    /// Transactions V2: partitions are enrolled by their leaders, and each transaction
    /// has an epoch of its own.
    pub v2: bool,
}

/// Whether the broker behind `writer` finalizes `transaction.version` 2 and serves
/// the requests transactions V2 needs (EndTxn v5, Produce v12), which is when Kafka's
/// producer speaks V2.
async fn offers_v2(
    writer: &mut RequestWriter,
    reader: &mut ResponseReader,
) -> Result<bool, String> {
    let answer = call(writer, reader, &ApiVersionsRequest::default(), 3)
        .await
        .map_err(|e| format!("ApiVersions: {e}"))?;
    let serves = |key: ApiKey, version: i16| {
        answer
            .api_keys
            .iter()
            .any(|k| k.api_key == key as i16 && k.max_version >= version)
    };
    let finalized = answer
        .finalized_features
        .iter()
        .any(|f| f.name.as_str() == "transaction.version" && f.max_version_level >= 2);
    Ok(finalized
        && serves(ApiKey::EndTxn, END_TXN_V2_VERSION)
        && serves(ApiKey::Produce, PRODUCE_V2_VERSION))
}

impl Transactions {
    /// Finds the coordinator of `id` through the stream's leader connection, connects to
    /// it and takes the id's producer id and epoch; speaks V2 where the coordinator
    /// offers it, unless the plan says V1.
    pub async fn start(
        dialer: &Dialer,
        leader: (&mut RequestWriter, &mut ResponseReader),
        id: String,
        topic: TopicName,
        partitions: Vec<i32>,
        plan: TxnPlan,
    ) -> Result<Transactions, String> {
        let mut find = FindCoordinatorRequest::default();
        find.key = StrBytes::from_string(id.clone());
        find.key_type = 1;
        let (lw, lr) = leader;
        let mut addr = None;
        for _ in 0..TRIES {
            let found = call(lw, lr, &find, FIND_COORDINATOR_VERSION)
                .await
                .map_err(|e| format!("FindCoordinator: {e}"))?;
            if found.error_code == 0 {
                addr = Some(format!("{}:{}", found.host.as_str(), found.port));
                break;
            }
            if !retriable(found.error_code) {
                return Err(format!("FindCoordinator: error {}", found.error_code));
            }
            glommio::timer::sleep(RETRY_PAUSE).await;
        }
        let addr = addr.ok_or("no transaction coordinator")?;
        let (mut writer, mut reader) = connect_with(dialer, &addr, "loadgen")
            .await
            .map_err(|e| format!("transaction coordinator {addr}: {e}"))?;
        let v2 = !plan.v1_only && offers_v2(&mut writer, &mut reader).await?;
        let mut session = Transactions {
            writer,
            reader,
            id: TransactionalId(StrBytes::from_string(id)),
            producer: (-1, -1),
            topic,
            partitions,
            size: plan.size,
            abort_ratio: plan.abort_ratio,
            ended: 0,
            v2,
        };
        let mut init = InitProducerIdRequest::default();
        init.transactional_id = Some(session.id.clone());
        init.transaction_timeout_ms = 60_000;
        init.producer_id = ProducerId(-1);
        init.producer_epoch = -1;
        let answer = session
            .retrying("InitProducerId", async |w, r| {
                let a = call(w, r, &init, INIT_PRODUCER_ID_VERSION).await?;
                Ok((a.error_code, (a.producer_id.0, a.producer_epoch)))
            })
            .await?;
        session.producer = answer;
        Ok(session)
    }

    /// Opens a transaction over the stream's partitions (V1 only: in V2 the first
    /// Produce to each partition opens it there).
    pub async fn begin(&mut self) -> Result<(), String> {
        let mut request = AddPartitionsToTxnRequest::default();
        request.v3_and_below_transactional_id = self.id.clone();
        request.v3_and_below_producer_id = ProducerId(self.producer.0);
        request.v3_and_below_producer_epoch = self.producer.1;
        let mut topic = AddPartitionsToTxnTopic::default();
        topic.name = self.topic.clone();
        topic.partitions = self.partitions.clone();
        request.v3_and_below_topics = vec![topic];
        self.retrying("AddPartitionsToTxn", async |w, r| {
            let a = call(w, r, &request, ADD_PARTITIONS_VERSION).await?;
            let code = a
                .results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| &t.results_by_partition)
                .map(|p| p.partition_error_code)
                .find(|c| *c != 0)
                .unwrap_or(0);
            Ok((code, ()))
        })
        .await
    }

    /// Whether the next transaction to end commits: aborts are spread evenly at
    /// `abort_ratio`.
    pub fn next_commits(&mut self) -> bool {
        let n = self.ended;
        self.ended += 1;
        commits(n, self.abort_ratio)
    }

    /// Ends the open transaction, committing it when `commit`. In V2, returns the
    /// producer id and epoch the next transaction's batches carry (their sequences
    /// start again at 0).
    pub async fn end(&mut self, commit: bool) -> Result<Option<(i64, i16)>, String> {
        let mut request = EndTxnRequest::default();
        request.transactional_id = self.id.clone();
        request.producer_id = ProducerId(self.producer.0);
        request.producer_epoch = self.producer.1;
        request.committed = commit;
        let version = if self.v2 {
            END_TXN_V2_VERSION
        } else {
            END_TXN_VERSION
        };
        let next = self
            .retrying("EndTxn", async |w, r| {
                let a = call(w, r, &request, version).await?;
                Ok((a.error_code, (a.producer_id.0, a.producer_epoch)))
            })
            .await?;
        if !self.v2 {
            return Ok(None);
        }
        self.producer = next;
        Ok(Some(next))
    }

    /// Runs `exchange` on the coordinator connection until it answers without a
    /// retriable error.
    async fn retrying<T>(
        &mut self,
        what: &str,
        mut exchange: impl AsyncFnMut(
            &mut RequestWriter,
            &mut ResponseReader,
        ) -> Result<(i16, T), weir_client::ClientError>,
    ) -> Result<T, String> {
        for _ in 0..TRIES {
            let (code, value) = exchange(&mut self.writer, &mut self.reader)
                .await
                .map_err(|e| format!("{what}: {e}"))?;
            match ResponseError::try_from_code(code) {
                None => return Ok(value),
                Some(_) if retriable(code) => glommio::timer::sleep(RETRY_PAUSE).await,
                Some(e) => return Err(format!("{what}: {e:?}")),
            }
        }
        Err(format!("{what}: still refused after {TRIES} tries"))
    }
}

#[cfg(test)]
mod tests {
    use super::commits;

    #[test]
    fn aborts_are_spread_evenly_at_the_ratio() {
        let aborted = |ratio: f64| (0..1000).filter(|n| !commits(*n, ratio)).count();
        assert_eq!(aborted(0.0), 0);
        assert_eq!(aborted(0.1), 100);
        assert_eq!(aborted(1.0), 1000);
        assert!(
            commits(0, 0.1) && !commits(9, 0.1),
            "the tenth of ten aborts"
        );
    }
}
