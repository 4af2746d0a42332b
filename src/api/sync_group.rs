//! SyncGroup.

use std::rc::Rc;

use kafka_protocol::{
    messages::{SyncGroupRequest, SyncGroupResponse},
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, str_bytes, Call, Handler, Reply};

/// SyncGroup.
pub struct SyncGroup;

impl Handler for SyncGroup {
    type Request = SyncGroupRequest;
    type Response = SyncGroupResponse;

    fn errors(r: &SyncGroupResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: SyncGroupRequest,
    ) -> Reply<SyncGroupResponse> {
        let ctx: &ShardContext = &ctx;
        let version = call.version();
        let group = req.group_id.0.as_str();
        let mut response = SyncGroupResponse::default();
        if !Access::of(ctx, &call).await.group(Operation::Read, group) {
            response.error_code = ResponseError::GroupAuthorizationFailed.code();
            return Reply::Respond(response);
        }
        if !ctx.owns_group(group) {
            response.error_code = ResponseError::NotCoordinator.code();
            return Reply::Respond(response);
        }
        let assignments = req
            .assignments
            .iter()
            .map(|a| (a.member_id.as_str().to_string(), a.assignment.clone()))
            .collect();
        let result = ctx
            .coordinator
            .sync(
                group,
                req.generation_id,
                req.member_id.as_str(),
                req.group_instance_id.as_ref().map(|i| i.as_str()),
                assignments,
            )
            .await;
        response.error_code = result.error.map_or(0, |e| e.code());
        response.assignment = result.assignment;
        if version >= 5 {
            response.protocol_type = result.protocol_type.as_deref().map(str_bytes);
            response.protocol_name = result.protocol_name.as_deref().map(str_bytes);
        }
        Reply::Respond(response)
    }
}
