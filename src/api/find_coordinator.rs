//! FindCoordinator: the shard that coordinates the group or transactional id, anywhere
//! in the cluster, for one key or a batch (v4+). The coordinator table is filled on the
//! first call.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        find_coordinator_response::Coordinator as CoordinatorEntry, BrokerId,
        FindCoordinatorRequest, FindCoordinatorResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    metadata::placement::{coordinator_slot, host_of, shard_of},
    security::acl::Operation,
    shard::context::ShardContext,
};

use super::{authorize::Access, str_bytes, Call, Handler, Reply};

type Located = Result<(BrokerId, StrBytes, i32), ResponseError>;

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
        let version = call.version();
        ctx.resync().await;
        let mut snapshot = ctx.metadata();
        if snapshot.view.coordinators.is_empty() {
            // The cluster's first FindCoordinator: the controller fills the table.
            if let Err(e) = ctx.registry.coordinators().await {
                tracing::warn!(error = %e, "no group coordinator table");
            }
            ctx.resync().await;
            snapshot = ctx.metadata();
        }
        let view = &snapshot.view;
        let table = &view.coordinators;
        let access = Access::of(&ctx, &call).await;
        // Key type 0 is a group, 1 a transactional id; both map through one table.
        let transactional = req.key_type == 1;
        let locate = |key: &str| -> Located {
            if transactional && !access.transactional_id(Operation::Describe, key) {
                return Err(ResponseError::TransactionalIdAuthorizationFailed);
            }
            if !transactional && !access.group(Operation::Describe, key) {
                return Err(ResponseError::GroupAuthorizationFailed);
            }
            let node = *table
                .get(coordinator_slot(key, table.len()))
                .ok_or(ResponseError::CoordinatorNotAvailable)?;
            let host = view
                .hosts
                .get(&host_of(node))
                .filter(|h| !h.fenced)
                .ok_or(ResponseError::CoordinatorNotAvailable)?;
            let port = call
                .session
                .protocol()
                .port_of(host)
                .ok_or(ResponseError::CoordinatorNotAvailable)?;
            let port = i32::from(port) + shard_of(node).0 as i32;
            Ok((BrokerId(node), str_bytes(&host.advertise), port))
        };
        let refused = !(0..=1).contains(&req.key_type);
        let mut response = FindCoordinatorResponse::default();
        if version >= 4 {
            for key in &req.coordinator_keys {
                let mut c = CoordinatorEntry::default();
                c.key = key.clone();
                match locate(key.as_str()) {
                    Ok((node, host, port)) if !refused => {
                        c.node_id = node;
                        c.host = host;
                        c.port = port;
                    }
                    not => {
                        c.error_code = not
                            .err()
                            .unwrap_or(ResponseError::CoordinatorNotAvailable)
                            .code();
                        c.node_id = BrokerId(-1);
                        c.port = -1;
                    }
                }
                response.coordinators.push(c);
            }
        } else {
            match locate(req.key.as_str()) {
                Ok((node, host, port)) if !refused => {
                    response.node_id = node;
                    response.host = host;
                    response.port = port;
                }
                not => {
                    response.error_code = not
                        .err()
                        .unwrap_or(ResponseError::CoordinatorNotAvailable)
                        .code();
                    response.node_id = BrokerId(-1);
                    response.port = -1;
                }
            }
        }
        Reply::Respond(response)
    }
}
