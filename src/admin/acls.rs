//! `weir acls add|list|remove`: ACLs over the wire (CreateAcls, DescribeAcls,
//! DeleteAcls), so they work against any host of a cluster.

use kafka_protocol::{
    messages::{
        create_acls_request::AclCreation, delete_acls_request::DeleteAclsFilter, CreateAclsRequest,
        DeleteAclsRequest, DescribeAclsRequest,
    },
    protocol::StrBytes,
};

use crate::security::acl::{codes, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME};

use super::commands::{check, Admin, AdminError, Result};

/// One ACL (or, for `list` and `remove`, a filter) as the command line gives it.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AclSpec {
    /// Who: `User:NAME`, or `User:*` for everyone.
    #[arg(long)]
    pub principal: Option<String>,
    /// What: all, read, write, create, delete, alter, describe, cluster-action,
    /// describe-configs, alter-configs, idempotent-write.
    #[arg(long)]
    pub operation: Option<String>,
    /// On this topic (`*` for every topic).
    #[arg(long, group = "resource")]
    pub topic: Option<String>,
    /// On this consumer group (`*` for every group).
    #[arg(long, group = "resource")]
    pub group: Option<String>,
    /// On the cluster.
    #[arg(long, group = "resource")]
    pub cluster: bool,
    /// The name is a prefix: every topic or group starting with it.
    #[arg(long)]
    pub prefixed: bool,
    /// Only from this client address. [default: * (any)]
    #[arg(long)]
    pub host: Option<String>,
    /// Deny instead of allow (a deny wins over every allow).
    #[arg(long)]
    pub deny: bool,
}

fn refused(why: impl Into<String>) -> AdminError {
    AdminError::Refused(why.into())
}

/// The operation called `name` on the command line.
fn operation(name: &str) -> Result<Operation> {
    let all = [
        ("all", Operation::All),
        ("read", Operation::Read),
        ("write", Operation::Write),
        ("create", Operation::Create),
        ("delete", Operation::Delete),
        ("alter", Operation::Alter),
        ("describe", Operation::Describe),
        ("cluster-action", Operation::ClusterAction),
        ("describe-configs", Operation::DescribeConfigs),
        ("alter-configs", Operation::AlterConfigs),
        ("idempotent-write", Operation::IdempotentWrite),
    ];
    let wanted = name.to_ascii_lowercase().replace('_', "-");
    all.iter()
        .find(|(n, _)| *n == wanted)
        .map(|(_, o)| *o)
        .ok_or_else(|| {
            refused(format!(
                "--operation {name:?} is not one of {:?}",
                all.map(|(n, _)| n)
            ))
        })
}

impl AclSpec {
    fn resource(&self) -> Option<(ResourceType, String)> {
        match (&self.topic, &self.group, self.cluster) {
            (Some(t), _, _) => Some((ResourceType::Topic, t.clone())),
            (_, Some(g), _) => Some((ResourceType::Group, g.clone())),
            (_, _, true) => Some((ResourceType::Cluster, CLUSTER_NAME.to_string())),
            _ => None,
        }
    }

    fn pattern(&self) -> PatternType {
        if self.prefixed {
            PatternType::Prefixed
        } else {
            PatternType::Literal
        }
    }

    fn permission(&self) -> Permission {
        if self.deny {
            Permission::Deny
        } else {
            Permission::Allow
        }
    }

    /// The filter these flags describe: unset fields match anything.
    fn filter(&self) -> Result<DeleteAclsFilter> {
        let mut f = DeleteAclsFilter::default();
        let resource = self.resource();
        f.resource_type_filter = resource
            .as_ref()
            .map_or(codes::ANY, |(t, _)| codes::resource_type(*t));
        f.resource_name_filter = resource.map(|(_, n)| StrBytes::from_string(n));
        f.pattern_type_filter = if self.prefixed {
            codes::pattern_type(PatternType::Prefixed)
        } else if f.resource_name_filter.is_some() {
            codes::pattern_type(PatternType::Literal)
        } else {
            codes::ANY
        };
        f.principal_filter = self.principal.clone().map(StrBytes::from_string);
        f.host_filter = self.host.clone().map(StrBytes::from_string);
        f.operation = match &self.operation {
            Some(o) => codes::operation(operation(o)?),
            None => codes::ANY,
        };
        f.permission_type = if self.deny {
            codes::permission(Permission::Deny)
        } else {
            codes::ANY
        };
        Ok(f)
    }
}

fn describe(
    resource_type: i8,
    name: &str,
    pattern: i8,
    principal: &str,
    host: &str,
    op: i8,
    perm: i8,
) -> String {
    let t = codes::to_resource_type(resource_type).map_or("?".into(), |t| format!("{t:?}"));
    let p = codes::to_pattern_type(pattern).map_or("?".into(), |p| format!("{p:?}"));
    let o = codes::to_operation(op).map_or("?".into(), |o| format!("{o:?}"));
    let a = codes::to_permission(perm).map_or("?".into(), |a| format!("{a:?}"));
    format!("{a:<6} {principal:<20} {o:<16} {t:<8} {name:<24} {p:<9} {host}\n")
}

impl Admin {
    /// Adds the ACL `spec` describes.
    pub fn acls_add(&mut self, spec: &AclSpec) -> Result<String> {
        let principal = spec
            .principal
            .clone()
            .ok_or_else(|| refused("say who: --principal User:NAME"))?;
        let op = operation(
            spec.operation
                .as_deref()
                .ok_or_else(|| refused("say what: --operation"))?,
        )?;
        let (resource_type, name) = spec
            .resource()
            .ok_or_else(|| refused("say on what: --topic, --group or --cluster"))?;
        let mut c = AclCreation::default();
        c.resource_type = codes::resource_type(resource_type);
        c.resource_name = StrBytes::from_string(name);
        c.resource_pattern_type = codes::pattern_type(spec.pattern());
        c.principal = StrBytes::from_string(principal);
        c.host = StrBytes::from_string(spec.host.clone().unwrap_or_else(|| "*".into()));
        c.operation = codes::operation(op);
        c.permission_type = codes::permission(spec.permission());
        let line = describe(
            c.resource_type,
            &c.resource_name,
            c.resource_pattern_type,
            &c.principal,
            &c.host,
            c.operation,
            c.permission_type,
        );
        let mut request = CreateAclsRequest::default();
        request.creations.push(c);
        let answer = self.bootstrap().call(&request, 3)?;
        for r in &answer.results {
            let why = r.error_message.as_ref().map_or("", |m| m.as_str());
            check(r.error_code, format!("adding the ACL ({why})"))?;
        }
        Ok(format!("added: {line}"))
    }

    /// The ACLs `spec`'s flags pick (all without flags).
    pub fn acls_list(&mut self, spec: &AclSpec) -> Result<String> {
        let f = spec.filter()?;
        let mut request = DescribeAclsRequest::default();
        request.resource_type_filter = f.resource_type_filter;
        request.resource_name_filter = f.resource_name_filter;
        request.pattern_type_filter = f.pattern_type_filter;
        request.principal_filter = f.principal_filter;
        request.host_filter = f.host_filter;
        request.operation = f.operation;
        request.permission_type = f.permission_type;
        let answer = self.bootstrap().call(&request, 3)?;
        let why = answer.error_message.as_ref().map_or("", |m| m.as_str());
        check(answer.error_code, format!("listing ACLs ({why})"))?;
        let mut out = format!(
            "{:<6} {:<20} {:<16} {:<8} {:<24} {:<9} HOST\n",
            "ACCESS", "PRINCIPAL", "OPERATION", "TYPE", "NAME", "PATTERN"
        );
        for r in &answer.resources {
            for a in &r.acls {
                out.push_str(&describe(
                    r.resource_type,
                    &r.resource_name,
                    r.pattern_type,
                    &a.principal,
                    &a.host,
                    a.operation,
                    a.permission_type,
                ));
            }
        }
        Ok(out)
    }

    /// Removes the ACLs `spec`'s flags pick; at least a principal or a resource must be
    /// named, so a bare `remove` cannot wipe every ACL by mistake.
    pub fn acls_remove(&mut self, spec: &AclSpec) -> Result<String> {
        if spec.principal.is_none() && spec.resource().is_none() {
            return Err(refused(
                "say which: --principal and/or --topic, --group, --cluster",
            ));
        }
        let mut request = DeleteAclsRequest::default();
        request.filters.push(spec.filter()?);
        let answer = self.bootstrap().call(&request, 3)?;
        let mut out = String::new();
        for f in &answer.filter_results {
            let why = f.error_message.as_ref().map_or("", |m| m.as_str());
            check(f.error_code, format!("removing ACLs ({why})"))?;
            for m in &f.matching_acls {
                out.push_str("removed: ");
                out.push_str(&describe(
                    m.resource_type,
                    &m.resource_name,
                    m.pattern_type,
                    &m.principal,
                    &m.host,
                    m.operation,
                    m.permission_type,
                ));
            }
        }
        if out.is_empty() {
            out.push_str("no ACL matched\n");
        }
        Ok(out)
    }
}
