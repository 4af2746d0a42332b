//! FindCoordinator: the shard that owns the group, for one key or a batch (v4+).

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        find_coordinator_response::Coordinator as CoordinatorEntry, BrokerId,
        FindCoordinatorRequest, FindCoordinatorResponse,
    },
    ResponseError,
};

use crate::{
    metadata::placement::{group_shard, shard_addr, ShardId},
    shard::context::ShardContext,
};

use super::{str_bytes, Call, Handler, Reply};

/// FindCoordinator: the shard that owns the group, for one key or a batch (v4+).
pub struct FindCoordinator;

impl Handler for FindCoordinator {
    type Request = FindCoordinatorRequest;
    type Response = FindCoordinatorResponse;

    fn errors(r: &FindCoordinatorResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
        r.coordinators.iter().for_each(|c| error(c.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: FindCoordinatorRequest,
    ) -> Reply<FindCoordinatorResponse> {
        let ctx: &ShardContext = &ctx;
        let version = call.version();
        let locate = |key: &str| {
            let shard = group_shard(key, ctx.config.shards);
            let port = i32::from(shard_addr(ctx.config.listen, ShardId(shard.0)).port());
            (
                BrokerId(shard.0 as i32),
                str_bytes(&ctx.config.advertise),
                port,
            )
        };
        // Only groups (key type 0) are coordinated; transactions are not supported.
        let refused = req.key_type != 0;
        let mut response = FindCoordinatorResponse::default();
        if version >= 4 {
            for key in &req.coordinator_keys {
                let mut c = CoordinatorEntry::default();
                c.key = key.clone();
                if refused {
                    c.error_code = ResponseError::CoordinatorNotAvailable.code();
                    c.node_id = BrokerId(-1);
                    c.port = -1;
                } else {
                    let (node, host, port) = locate(key.as_str());
                    c.node_id = node;
                    c.host = host;
                    c.port = port;
                }
                response.coordinators.push(c);
            }
        } else if refused {
            response.error_code = ResponseError::CoordinatorNotAvailable.code();
            response.node_id = BrokerId(-1);
            response.port = -1;
        } else {
            let (node, host, port) = locate(req.key.as_str());
            response.node_id = node;
            response.host = host;
            response.port = port;
        }
        Reply::Respond(response)
    }
}
