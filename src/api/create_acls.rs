//! CreateAcls: adds ACL bindings (needs ALTER on the cluster). Each creation is
//! answered on its own: an invalid one with INVALID_REQUEST and why; the valid ones are
//! stored together, through the controller on a cluster host.

use std::rc::Rc;

use kafka_protocol::{
    messages::{create_acls_response::AclCreationResult, CreateAclsRequest, CreateAclsResponse},
    ResponseError,
};

use crate::{
    security::{acl::Operation, state::SecurityChange},
    shard::context::ShardContext,
};

use super::{acl_wire, authorize::Access, error_code::KafkaError, str_bytes, Call, Handler, Reply};

/// Adds ACLs.
pub struct CreateAcls;

impl Handler for CreateAcls {
    type Request = CreateAclsRequest;
    type Response = CreateAclsResponse;

    fn errors(r: &CreateAclsResponse, error: &mut dyn FnMut(i16)) {
        r.results.iter().for_each(|c| error(c.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        request: CreateAclsRequest,
    ) -> Reply<CreateAclsResponse> {
        let allowed = Access::of(&ctx, &call).await.cluster(Operation::Alter);
        let checked: Vec<Result<_, (ResponseError, String)>> = request
            .creations
            .iter()
            .map(|c| {
                if !allowed {
                    return Err((
                        ResponseError::ClusterAuthorizationFailed,
                        "ALTER on the cluster is needed".to_string(),
                    ));
                }
                acl_wire::binding(
                    c.resource_type,
                    c.resource_name.as_str(),
                    c.resource_pattern_type,
                    c.principal.as_str(),
                    c.host.as_str(),
                    c.operation,
                    c.permission_type,
                )
                .map_err(|why| (ResponseError::InvalidRequest, why))
            })
            .collect();
        let valid: Vec<_> = checked
            .iter()
            .filter_map(|c| c.as_ref().ok())
            .cloned()
            .collect();
        let stored = if valid.is_empty() {
            Ok(())
        } else {
            ctx.registry
                .alter_security(SecurityChange::CreateAcls(valid))
                .await
        };
        let mut response = CreateAclsResponse::default();
        for c in checked {
            let mut result = AclCreationResult::default();
            let refusal = match (c, &stored) {
                (Err(refusal), _) => Some(refusal),
                (Ok(_), Err(e)) => Some((e.kafka_error(), e.to_string())),
                (Ok(_), Ok(())) => None,
            };
            if let Some((error, why)) = refusal {
                result.error_code = error.code();
                result.error_message = Some(str_bytes(&why));
            }
            response.results.push(result);
        }
        Reply::Respond(response)
    }
}
