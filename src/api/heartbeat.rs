//! Heartbeat.

use std::rc::Rc;

use kafka_protocol::{
    messages::{HeartbeatRequest, HeartbeatResponse},
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, error_code::code_of, Call, Handler, Reply};

/// Heartbeat.
pub struct Heartbeat;

impl Handler for Heartbeat {
    type Request = HeartbeatRequest;
    type Response = HeartbeatResponse;

    fn errors(r: &HeartbeatResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: HeartbeatRequest,
    ) -> Reply<HeartbeatResponse> {
        let ctx: &ShardContext = &ctx;
        let group = req.group_id.0.as_str();
        let mut response = HeartbeatResponse::default();
        response.error_code = if !Access::of(ctx, &call).await.group(Operation::Read, group) {
            ResponseError::GroupAuthorizationFailed.code()
        } else if ctx.owns_group(group) {
            code_of(&ctx.coordinator.heartbeat(
                group,
                req.generation_id,
                req.member_id.as_str(),
                req.group_instance_id.as_ref().map(|i| i.as_str()),
            ))
        } else {
            ResponseError::NotCoordinator.code()
        };
        Reply::Respond(response)
    }
}
