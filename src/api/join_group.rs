//! JoinGroup.

use std::{rc::Rc, time::Duration};

use kafka_protocol::{
    messages::{join_group_response::JoinGroupResponseMember, JoinGroupRequest, JoinGroupResponse},
    protocol::StrBytes,
    ResponseError,
};

use crate::{group::state::JoinRequest, security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, str_bytes, Call, Handler, Reply};

/// JoinGroup.
pub struct JoinGroup;

impl Handler for JoinGroup {
    type Request = JoinGroupRequest;
    type Response = JoinGroupResponse;

    fn errors(r: &JoinGroupResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: JoinGroupRequest,
    ) -> Reply<JoinGroupResponse> {
        let ctx: &ShardContext = &ctx;
        let version = call.version();
        let group = req.group_id.0.as_str().to_string();
        let mut response = JoinGroupResponse::default();
        if !Access::of(ctx, &call).await.group(Operation::Read, &group) {
            response.error_code = ResponseError::GroupAuthorizationFailed.code();
            response.generation_id = -1;
            return Reply::Respond(response);
        }
        if !ctx.owns_group(&group) {
            response.error_code = ResponseError::NotCoordinator.code();
            response.generation_id = -1;
            return Reply::Respond(response);
        }
        let session = Duration::from_millis(req.session_timeout_ms.max(0) as u64);
        let rebalance = if version >= 1 {
            Duration::from_millis(req.rebalance_timeout_ms.max(0) as u64)
        } else {
            session
        };
        let result = ctx
            .coordinator
            .join(JoinRequest {
                group,
                member_id: req.member_id.as_str().to_string(),
                group_instance_id: req
                    .group_instance_id
                    .as_ref()
                    .map(|i| i.as_str().to_string()),
                client_id: call.client_id().unwrap_or("client").to_string(),
                session_timeout: session,
                rebalance_timeout: rebalance,
                protocol_type: req.protocol_type.as_str().to_string(),
                protocols: req
                    .protocols
                    .iter()
                    .map(|p| (p.name.as_str().to_string(), p.metadata.clone()))
                    .collect(),
                require_known_member_id: version >= 4,
            })
            .await;
        response.error_code = result.error.map_or(0, |e| e.code());
        response.generation_id = result.generation;
        response.member_id = str_bytes(&result.member_id);
        response.leader = str_bytes(&result.leader);
        if version >= 7 {
            response.protocol_type = result.protocol_type.as_deref().map(str_bytes);
        }
        response.protocol_name = result.protocol_name.as_deref().map(str_bytes);
        if version < 7 && response.protocol_name.is_none() {
            response.protocol_name = Some(StrBytes::default());
        }
        response.members = result
            .members
            .into_iter()
            .map(|(id, instance, metadata)| {
                let mut m = JoinGroupResponseMember::default();
                m.member_id = str_bytes(&id);
                if version >= 5 {
                    m.group_instance_id = instance.as_deref().map(str_bytes);
                }
                m.metadata = metadata;
                m
            })
            .collect();
        Reply::Respond(response)
    }
}
