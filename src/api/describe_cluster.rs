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

use crate::shard::context::ShardContext;

use super::{
    decode_body, encode,
    metadata::{brokers, CLUSTER_ID},
    Request,
};

/// Lists every shard as a broker.
pub fn handle(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    let _req: DescribeClusterRequest = decode_body(request)?;
    let mut response = DescribeClusterResponse::default();
    response.cluster_id = StrBytes::from_static_str(CLUSTER_ID);
    response.controller_id = BrokerId(0);
    response.cluster_authorized_operations = i32::MIN;
    response.brokers = brokers(ctx)
        .map(|(broker_id, host, port)| {
            let mut b = DescribeClusterBroker::default();
            b.broker_id = broker_id;
            b.host = host;
            b.port = port;
            b
        })
        .collect();
    encode(request, request.version(), &response)
}
