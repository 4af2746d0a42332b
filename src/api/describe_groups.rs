//! DescribeGroups: state, protocol and members of each group.

use std::rc::Rc;

use kafka_protocol::{protocol::StrBytes, ResponseError};

use crate::{security::acl::Operation, shard::context::ShardContext};

use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use super::{authorize::Access, str_bytes, Call, Handler, Reply};

/// DescribeGroups: state, protocol and members of each group.
pub struct DescribeGroups;

impl Handler for DescribeGroups {
    type Request = DescribeGroupsRequest;
    type Response = DescribeGroupsResponse;

    fn errors(r: &DescribeGroupsResponse, error: &mut dyn FnMut(i16)) {
        r.groups.iter().for_each(|g| error(g.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: DescribeGroupsRequest,
    ) -> Reply<DescribeGroupsResponse> {
        let ctx: &ShardContext = &ctx;
        use kafka_protocol::messages::{
            describe_groups_response::{DescribedGroup, DescribedGroupMember},
            DescribeGroupsResponse,
        };
        let version = call.version();
        let mut response = DescribeGroupsResponse::default();
        let access = Access::of(ctx, &call).await;
        for group in &req.groups {
            let mut d = DescribedGroup::default();
            d.group_id = group.clone();
            if !access.group(Operation::Describe, group.0.as_str()) {
                d.error_code = ResponseError::GroupAuthorizationFailed.code();
            } else if !ctx.owns_group(group.0.as_str()) {
                d.error_code = ResponseError::NotCoordinator.code();
            } else {
                match ctx.coordinator.members(group.0.as_str()) {
                    None => {
                        d.group_state =
                            StrBytes::from_static_str(if version >= 6 { "Dead" } else { "Empty" })
                    }
                    Some(described) => {
                        d.group_state = StrBytes::from_static_str(described.state.kafka_name());
                        d.protocol_type = str_bytes(&described.protocol_type);
                        d.protocol_data = str_bytes(&described.protocol);
                        d.members = described
                            .members
                            .into_iter()
                            .map(|member| {
                                let mut m = DescribedGroupMember::default();
                                m.member_id = str_bytes(&member.member_id);
                                if version >= 4 {
                                    m.group_instance_id =
                                        member.instance_id.as_deref().map(str_bytes);
                                }
                                m.client_id = str_bytes(&member.client_id);
                                m.client_host = StrBytes::from_static_str("/127.0.0.1");
                                m.member_metadata = member.metadata;
                                m.member_assignment = member.assignment;
                                m
                            })
                            .collect();
                    }
                }
            }
            response.groups.push(d);
        }
        Reply::Respond(response)
    }
}
