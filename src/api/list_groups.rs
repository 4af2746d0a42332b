//! ListGroups: the groups this shard coordinates (members or committed offsets).

use std::rc::Rc;

use kafka_protocol::{protocol::StrBytes, ResponseError};

use crate::{security::acl::Operation, shard::context::ShardContext};

use kafka_protocol::messages::{ListGroupsRequest, ListGroupsResponse};

use super::{authorize::Access, str_bytes, Call, Handler, Reply};

/// ListGroups: the groups this shard coordinates (members or committed offsets).
pub struct ListGroups;

impl Handler for ListGroups {
    type Request = ListGroupsRequest;
    type Response = ListGroupsResponse;

    fn errors(r: &ListGroupsResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: ListGroupsRequest,
    ) -> Reply<ListGroupsResponse> {
        let ctx: &ShardContext = &ctx;
        use kafka_protocol::messages::{
            list_groups_response::ListedGroup, GroupId, ListGroupsResponse,
        };
        let version = call.version();
        let mut response = ListGroupsResponse::default();
        // Only the groups the principal may describe.
        let access = Access::of(ctx, &call).await;
        let with_offsets = match ctx.coordinator.store().groups() {
            Ok(all) => all.into_iter().filter(|g| ctx.owns_group(g)).collect(),
            Err(e) => {
                tracing::error!(error = %e, "listing groups failed");
                response.error_code = ResponseError::KafkaStorageError.code();
                Vec::new()
            }
        };
        for (id, protocol_type, state) in ctx.coordinator.list(with_offsets) {
            if !access.group(Operation::Describe, &id) {
                continue;
            }
            if !req.states_filter.is_empty()
                && !req
                    .states_filter
                    .iter()
                    .any(|f| f.as_str() == state.kafka_name())
            {
                continue;
            }
            let mut g = ListedGroup::default();
            g.group_id = GroupId(str_bytes(&id));
            g.protocol_type = str_bytes(&protocol_type);
            if version >= 4 {
                g.group_state = StrBytes::from_static_str(state.kafka_name());
            }
            if version >= 5 {
                g.group_type = StrBytes::from_static_str("classic");
            }
            response.groups.push(g);
        }
        Reply::Respond(response)
    }
}
