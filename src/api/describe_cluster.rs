//! DescribeCluster: the cluster id, the controller and the brokers (one per shard), as
//! admin clients list them.

use bytes::Bytes;
use kafka_protocol::{
    messages::{
        describe_cluster_response::DescribeClusterBroker, BrokerId, DescribeClusterRequest,
        DescribeClusterResponse,
    },
    protocol::StrBytes,
};

use crate::{
    metadata::placement::ShardId,
    shard::{context::ShardContext, shard_addr},
};

use super::{decode_body, encode, metadata::CLUSTER_ID, Request};

/// Lists every shard as a broker.
pub fn handle(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    let _req: DescribeClusterRequest = decode_body(request)?;
    let mut response = DescribeClusterResponse::default();
    response.cluster_id = StrBytes::from_static_str(CLUSTER_ID);
    response.controller_id = BrokerId(0);
    response.cluster_authorized_operations = i32::MIN;
    response.brokers = (0..ctx.config.shards)
        .map(|s| {
            let mut b = DescribeClusterBroker::default();
            b.broker_id = BrokerId(s as i32);
            b.host = StrBytes::from_string(ctx.config.advertise.clone());
            b.port = i32::from(shard_addr(&ctx.config, ShardId(s)).port());
            b
        })
        .collect();
    encode(request, request.version(), &response)
}
