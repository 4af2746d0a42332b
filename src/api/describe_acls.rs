//! DescribeAcls: the bindings a filter picks (needs DESCRIBE on the cluster), grouped
//! by resource pattern as Kafka answers.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        describe_acls_response::{AclDescription, DescribeAclsResource},
        DescribeAclsRequest, DescribeAclsResponse,
    },
    ResponseError,
};

use crate::{
    security::acl::{codes, Operation},
    shard::context::ShardContext,
};

use super::{acl_wire, authorize::Access, str_bytes, Call, Handler, Reply};

/// Lists ACLs.
pub struct DescribeAcls;

impl Handler for DescribeAcls {
    type Request = DescribeAclsRequest;
    type Response = DescribeAclsResponse;

    fn errors(r: &DescribeAclsResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        r: DescribeAclsRequest,
    ) -> Reply<DescribeAclsResponse> {
        let mut response = DescribeAclsResponse::default();
        if !Access::of(&ctx, &call).await.cluster(Operation::Describe) {
            response.error_code = ResponseError::ClusterAuthorizationFailed.code();
            response.error_message = Some(str_bytes("DESCRIBE on the cluster is needed"));
            return Reply::Respond(response);
        }
        let filter = match acl_wire::filter(
            r.resource_type_filter,
            r.resource_name_filter.as_ref(),
            r.pattern_type_filter,
            r.principal_filter.as_ref(),
            r.host_filter.as_ref(),
            r.operation,
            r.permission_type,
        ) {
            Ok(f) => f,
            Err(why) => {
                response.error_code = ResponseError::InvalidRequest.code();
                response.error_message = Some(str_bytes(&why));
                return Reply::Respond(response);
            }
        };
        ctx.resync().await;
        let acls = std::sync::Arc::clone(&ctx.metadata().view.acls);
        // Sorted by resource pattern, so equal patterns are neighbours.
        for b in acls.iter().filter(|b| filter.matches(b)) {
            let (t, p) = (
                codes::resource_type(b.resource_type),
                codes::pattern_type(b.pattern),
            );
            let same = response.resources.last().is_some_and(|r| {
                r.resource_type == t && r.pattern_type == p && r.resource_name.as_str() == b.name
            });
            if !same {
                let mut resource = DescribeAclsResource::default();
                resource.resource_type = t;
                resource.resource_name = str_bytes(&b.name);
                resource.pattern_type = p;
                response.resources.push(resource);
            }
            let mut acl = AclDescription::default();
            acl.principal = str_bytes(&b.principal);
            acl.host = str_bytes(&b.host);
            acl.operation = codes::operation(b.operation);
            acl.permission_type = codes::permission(b.permission);
            if let Some(r) = response.resources.last_mut() {
                r.acls.push(acl);
            }
        }
        Reply::Respond(response)
    }
}
