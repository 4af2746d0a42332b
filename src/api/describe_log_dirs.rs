//! DescribeLogDirs: the partitions whose replicas this node (shard) keeps in the data
//! directory, with their size on disk, as `kafka-log-dirs.sh` and admin UIs read them.
//! weir has one log directory per host, so each node answers one entry; the free and
//! total bytes of its volume are unknown (-1, as Kafka says for a volume it cannot
//! measure), since asking the kernel would block the reactor.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        describe_log_dirs_response::{
            DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
        },
        DescribeLogDirsRequest, DescribeLogDirsResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, topic_name, Call, Handler, Reply};

/// Lists this node's replicas and their sizes.
pub struct DescribeLogDirs;

impl Handler for DescribeLogDirs {
    type Request = DescribeLogDirsRequest;
    type Response = DescribeLogDirsResponse;

    fn errors(r: &DescribeLogDirsResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
        r.results.iter().for_each(|d| error(d.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: DescribeLogDirsRequest,
    ) -> Reply<DescribeLogDirsResponse> {
        let ctx: &ShardContext = &ctx;
        let mut response = DescribeLogDirsResponse::default();
        // Kafka asks for DESCRIBE on the cluster and answers an empty list without it
        // (versions before 3 have no top-level error code).
        if !Access::of(ctx, &call).await.cluster(Operation::Describe) {
            response.error_code = ResponseError::ClusterAuthorizationFailed.code();
            return Reply::Respond(response);
        }
        ctx.resync().await;
        let snapshot = ctx.metadata();
        let wanted = |topic: &str, p: i32| {
            req.topics.as_ref().is_none_or(|topics| {
                topics
                    .iter()
                    .any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&p))
            })
        };
        let mut dir = DescribeLogDirsResult::default();
        dir.log_dir = StrBytes::from_string(ctx.config.data_dir.display().to_string());
        for t in snapshot.topics.values() {
            let mut topic = DescribeLogDirsTopic::default();
            topic.name = topic_name(&t.name);
            for (p, state) in t.states.iter().enumerate() {
                let index = p as i32;
                if !state.replicas.contains(&ctx.node) || !wanted(&t.name, index) {
                    continue;
                }
                // A replica this shard cannot open (fenced, being deleted) is left out,
                // as Kafka leaves out a partition it has no log for.
                let Ok(log) = ctx.replica(&t.name, p as u32).await else {
                    continue;
                };
                let mut part = DescribeLogDirsPartition::default();
                part.partition_index = index;
                part.partition_size = i64::try_from(log.offsets().bytes).unwrap_or(i64::MAX);
                topic.partitions.push(part);
            }
            if !topic.partitions.is_empty() {
                dir.topics.push(topic);
            }
        }
        response.results.push(dir);
        Reply::Respond(response)
    }
}
