//! ACLs as the Kafka wire writes them (numbered enums, nullable filter fields) to and
//! from [`crate::security::acl`]'s types, for CreateAcls, DescribeAcls and DeleteAcls.

use kafka_protocol::protocol::StrBytes;

use crate::security::acl::{
    codes, AclBinding, AclFilter, PatternFilter, ResourceType, CLUSTER_NAME,
};

/// A binding from CreateAcls' fields, or why it is invalid (Kafka answers
/// INVALID_REQUEST with the reason).
#[allow(clippy::too_many_arguments)]
pub fn binding(
    resource_type: i8,
    name: &str,
    pattern: i8,
    principal: &str,
    host: &str,
    operation: i8,
    permission: i8,
) -> Result<AclBinding, String> {
    let resource_type = codes::to_resource_type(resource_type)
        .ok_or_else(|| format!("resource type {resource_type} is not one an ACL can name"))?;
    let pattern = codes::to_pattern_type(pattern)
        .ok_or_else(|| format!("pattern type {pattern} is not LITERAL or PREFIXED"))?;
    let operation = codes::to_operation(operation)
        .ok_or_else(|| format!("operation {operation} is not one an ACL can name"))?;
    let permission = codes::to_permission(permission)
        .ok_or_else(|| format!("permission {permission} is not ALLOW or DENY"))?;
    if name.is_empty() {
        return Err("the resource name is empty".into());
    }
    if resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
        return Err(format!("the cluster resource is named {CLUSTER_NAME}"));
    }
    if !principal.starts_with("User:") || principal.len() == 5 {
        return Err(format!("principal {principal:?} is not User:NAME"));
    }
    if host.is_empty() {
        return Err("the host is empty (use * for any)".into());
    }
    Ok(AclBinding {
        resource_type,
        name: name.to_string(),
        pattern,
        principal: principal.to_string(),
        host: host.to_string(),
        operation,
        permission,
    })
}

/// A filter from DescribeAcls' or DeleteAcls' fields, or why it is invalid.
#[allow(clippy::too_many_arguments)]
pub fn filter(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclFilter, String> {
    fn any_or<T>(n: i8, what: &str, parsed: Option<T>) -> Result<Option<T>, String> {
        if n == codes::ANY {
            Ok(None)
        } else {
            parsed
                .map(Some)
                .ok_or_else(|| format!("{what} {n} is not one a filter can name"))
        }
    }
    let pattern = match pattern {
        codes::ANY => PatternFilter::Any,
        codes::MATCH => PatternFilter::Match,
        n => PatternFilter::Exactly(
            codes::to_pattern_type(n).ok_or_else(|| format!("pattern type {n} is unknown"))?,
        ),
    };
    Ok(AclFilter {
        resource_type: any_or(
            resource_type,
            "resource type",
            codes::to_resource_type(resource_type),
        )?,
        name: name.map(|n| n.as_str().to_string()),
        pattern,
        principal: principal.map(|p| p.as_str().to_string()),
        host: host.map(|h| h.as_str().to_string()),
        operation: any_or(operation, "operation", codes::to_operation(operation))?,
        permission: any_or(permission, "permission", codes::to_permission(permission))?,
    })
}
