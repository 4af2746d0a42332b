//! LeaveGroup, for one member (v0–2) or several (v3+).

use std::rc::Rc;

use kafka_protocol::{
    messages::{leave_group_response::MemberResponse, LeaveGroupRequest, LeaveGroupResponse},
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, error_code::code_of, Call, Handler, Reply};

/// LeaveGroup, for one member (v0–2) or several (v3+).
pub struct LeaveGroup;

impl Handler for LeaveGroup {
    type Request = LeaveGroupRequest;
    type Response = LeaveGroupResponse;

    fn errors(r: &LeaveGroupResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
        r.members.iter().for_each(|m| error(m.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: LeaveGroupRequest,
    ) -> Reply<LeaveGroupResponse> {
        let ctx: &ShardContext = &ctx;
        let version = call.version();
        let group = req.group_id.0.as_str();
        let mut response = LeaveGroupResponse::default();
        if !Access::of(ctx, &call).await.group(Operation::Read, group) {
            response.error_code = ResponseError::GroupAuthorizationFailed.code();
            return Reply::Respond(response);
        }
        if !ctx.owns_group(group) {
            response.error_code = ResponseError::NotCoordinator.code();
            return Reply::Respond(response);
        }
        if version >= 3 {
            let ids: Vec<String> = req
                .members
                .iter()
                .map(|m| m.member_id.as_str().to_string())
                .collect();
            let codes = ctx.coordinator.leave(group, &ids);
            response.members = req
                .members
                .iter()
                .zip(codes)
                .map(|(m, code)| {
                    let mut r = MemberResponse::default();
                    r.member_id = m.member_id.clone();
                    r.group_instance_id = m.group_instance_id.clone();
                    r.error_code = code_of(&code);
                    r
                })
                .collect();
        } else {
            response.error_code = code_of(
                &ctx.coordinator
                    .leave(group, &[req.member_id.as_str().to_string()])[0],
            );
        }
        Reply::Respond(response)
    }
}
