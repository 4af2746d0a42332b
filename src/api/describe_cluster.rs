//! DescribeCluster: the cluster id, the controller and the brokers (one per shard of
//! every live host), as
//! admin clients list them.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        describe_cluster_response::DescribeClusterBroker, BrokerId, DescribeClusterRequest,
        DescribeClusterResponse,
    },
    protocol::StrBytes,
};

use crate::shard::context::ShardContext;

use super::{metadata::brokers, Call, Handler, Reply};

/// Lists every shard as a broker.
pub struct DescribeCluster;

impl Handler for DescribeCluster {
    type Request = DescribeClusterRequest;
    type Response = DescribeClusterResponse;

    fn errors(r: &DescribeClusterResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        _req: DescribeClusterRequest,
    ) -> Reply<DescribeClusterResponse> {
        let ctx: &ShardContext = &ctx;
        let mut response = DescribeClusterResponse::default();
        ctx.resync().await;
        let snapshot = ctx.metadata();
        let view = &snapshot.view;
        response.cluster_id = StrBytes::from_string(view.cluster_id.clone());
        response.controller_id = BrokerId(view.controller.unwrap_or(-1));
        response.cluster_authorized_operations = i32::MIN;
        response.brokers = brokers(view, call.session.protocol())
            .map(|(broker_id, host, port)| {
                let mut b = DescribeClusterBroker::default();
                b.broker_id = broker_id;
                b.host = host;
                b.port = port;
                b
            })
            .collect();
        Reply::Respond(response)
    }
}
