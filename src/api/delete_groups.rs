//! DeleteGroups: removes empty groups and their committed offsets.

use std::rc::Rc;

use crate::{security::acl::Operation, shard::context::ShardContext};

use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::{authorize::Access, error_code::code_of, Call, Handler, Reply};

/// DeleteGroups: removes empty groups and their committed offsets.
pub struct DeleteGroups;

impl Handler for DeleteGroups {
    type Request = DeleteGroupsRequest;
    type Response = DeleteGroupsResponse;

    fn errors(r: &DeleteGroupsResponse, error: &mut dyn FnMut(i16)) {
        r.results.iter().for_each(|g| error(g.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: DeleteGroupsRequest,
    ) -> Reply<DeleteGroupsResponse> {
        let ctx: &ShardContext = &ctx;
        use kafka_protocol::messages::{
            delete_groups_response::DeletableGroupResult, DeleteGroupsResponse,
        };
        let mut response = DeleteGroupsResponse::default();
        let access = Access::of(ctx, &call).await;
        for group in &req.groups_names {
            let mut r = DeletableGroupResult::default();
            r.group_id = group.clone();
            let name = group.0.as_str();
            if !access.group(Operation::Delete, name) {
                r.error_code = kafka_protocol::ResponseError::GroupAuthorizationFailed.code();
                response.results.push(r);
                continue;
            }
            r.error_code = match ctx.coordinating(name).await {
                Ok(journal) => code_of(&ctx.coordinator.delete(name, journal).await),
                Err(e) => e.code(),
            };
            response.results.push(r);
        }
        Reply::Respond(response)
    }
}
