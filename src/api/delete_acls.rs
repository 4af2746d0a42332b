//! DeleteAcls: removes the bindings each filter picks (needs ALTER on the cluster) and
//! answers each filter with the bindings it removed.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl},
        DeleteAclsRequest, DeleteAclsResponse,
    },
    ResponseError,
};

use crate::{
    security::{
        acl::{codes, AclBinding, Operation},
        state::SecurityChange,
    },
    shard::context::ShardContext,
};

use super::{acl_wire, authorize::Access, error_code::KafkaError, str_bytes, Call, Handler, Reply};

/// Removes ACLs.
pub struct DeleteAcls;

impl Handler for DeleteAcls {
    type Request = DeleteAclsRequest;
    type Response = DeleteAclsResponse;

    fn errors(r: &DeleteAclsResponse, error: &mut dyn FnMut(i16)) {
        r.filter_results.iter().for_each(|f| error(f.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        request: DeleteAclsRequest,
    ) -> Reply<DeleteAclsResponse> {
        let allowed = Access::of(&ctx, &call).await.cluster(Operation::Alter);
        ctx.resync().await;
        let acls = std::sync::Arc::clone(&ctx.metadata().view.acls);
        let picked: Vec<Result<Vec<AclBinding>, (ResponseError, String)>> = request
            .filters
            .iter()
            .map(|f| {
                if !allowed {
                    return Err((
                        ResponseError::ClusterAuthorizationFailed,
                        "ALTER on the cluster is needed".to_string(),
                    ));
                }
                let filter = acl_wire::filter(
                    f.resource_type_filter,
                    f.resource_name_filter.as_ref(),
                    f.pattern_type_filter,
                    f.principal_filter.as_ref(),
                    f.host_filter.as_ref(),
                    f.operation,
                    f.permission_type,
                )
                .map_err(|why| (ResponseError::InvalidRequest, why))?;
                Ok(acls.iter().filter(|b| filter.matches(b)).cloned().collect())
            })
            .collect();
        let removed: Vec<AclBinding> = picked.iter().flatten().flatten().cloned().collect();
        let stored = if removed.is_empty() {
            Ok(())
        } else {
            ctx.registry
                .alter_security(SecurityChange::DeleteAcls(removed))
                .await
        };
        let mut response = DeleteAclsResponse::default();
        for p in picked {
            let mut result = DeleteAclsFilterResult::default();
            match (p, &stored) {
                (Err((error, why)), _) => {
                    result.error_code = error.code();
                    result.error_message = Some(str_bytes(&why));
                }
                (Ok(_), Err(e)) => {
                    result.error_code = e.kafka_error().code();
                    result.error_message = Some(str_bytes(&e.to_string()));
                }
                (Ok(bindings), Ok(())) => {
                    result.matching_acls = bindings.iter().map(matching).collect();
                }
            }
            response.filter_results.push(result);
        }
        Reply::Respond(response)
    }
}

fn matching(b: &AclBinding) -> DeleteAclsMatchingAcl {
    let mut m = DeleteAclsMatchingAcl::default();
    m.resource_type = codes::resource_type(b.resource_type);
    m.resource_name = str_bytes(&b.name);
    m.pattern_type = codes::pattern_type(b.pattern);
    m.principal = str_bytes(&b.principal);
    m.host = str_bytes(&b.host);
    m.operation = codes::operation(b.operation);
    m.permission_type = codes::permission(b.permission);
    m
}
