//! Kafka's ACL model: a binding allows or denies one principal, from one host (or `*`),
//! one operation on the resources a literal or prefixed name pattern picks. The
//! decision follows Kafka's authorizer: a matching DENY wins; otherwise a matching ALLOW
//! is needed, where READ, WRITE, DELETE and ALTER imply DESCRIBE and ALTER_CONFIGS
//! implies DESCRIBE_CONFIGS; ALL stands for every operation; `User:*` for every
//! principal; a literal `*` name for every resource of its type.

use serde::{Deserialize, Serialize};

/// The cluster resource's only name.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// What an ACL protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ResourceType {
    /// A topic.
    Topic,
    /// A consumer group.
    Group,
    /// The cluster (named [`CLUSTER_NAME`]).
    Cluster,
    /// A transactional id.
    TransactionalId,
}

/// How an ACL's name picks resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PatternType {
    /// The resource named exactly so (or every one, for `*`).
    Literal,
    /// Every resource whose name starts with it.
    Prefixed,
}

/// An operation on a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operation {
    /// Every operation.
    All,
    /// Fetch, join and commit.
    Read,
    /// Produce.
    Write,
    /// CreateTopics.
    Create,
    /// DeleteTopics, DeleteRecords, DeleteGroups.
    Delete,
    /// CreatePartitions, ACL and user changes.
    Alter,
    /// Metadata, offsets, describing.
    Describe,
    /// Replication between brokers.
    ClusterAction,
    /// DescribeConfigs.
    DescribeConfigs,
    /// AlterConfigs.
    AlterConfigs,
    /// An idempotent producer id.
    IdempotentWrite,
}

/// Allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Permission {
    /// Denies; wins over any allow.
    Deny,
    /// Allows.
    Allow,
}

/// One ACL.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    /// The resource type.
    pub resource_type: ResourceType,
    /// The name (or prefix).
    pub name: String,
    /// How `name` picks resources.
    pub pattern: PatternType,
    /// `User:NAME` or `User:*`.
    pub principal: String,
    /// The client's address, or `*`.
    pub host: String,
    /// The operation.
    pub operation: Operation,
    /// Allow or deny.
    pub permission: Permission,
}

/// How a filter's name picks bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Bindings with this name, of any pattern type.
    Any,
    /// Bindings that apply to a resource of this name (literal, `*`, or a prefix of it).
    Match,
    /// Bindings of this pattern type.
    Exactly(PatternType),
}

/// Picks bindings (DescribeAcls, DeleteAcls); `None` fields match anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    /// The resource type.
    pub resource_type: Option<ResourceType>,
    /// The name.
    pub name: Option<String>,
    /// How the name picks.
    pub pattern: PatternFilter,
    /// The principal.
    pub principal: Option<String>,
    /// The host.
    pub host: Option<String>,
    /// The operation.
    pub operation: Option<Operation>,
    /// The permission.
    pub permission: Option<Permission>,
}

impl AclBinding {
    /// True when this binding's pattern picks the resource `name` of `resource_type`.
    fn covers(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern {
                PatternType::Literal => self.name == name || self.name == "*",
                PatternType::Prefixed => name.starts_with(&self.name),
            }
    }

    /// True when it applies to `principal` connecting from `host`.
    fn concerns(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == "User:*")
            && (self.host == host || self.host == "*")
    }
}

impl AclFilter {
    /// True when `binding` is one this filter picks.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        let name_matches = match (&self.name, self.pattern) {
            (None, PatternFilter::Exactly(p)) => binding.pattern == p,
            (None, _) => true,
            (Some(name), PatternFilter::Any) => binding.name == *name,
            (Some(name), PatternFilter::Exactly(p)) => {
                binding.pattern == p && binding.name == *name
            }
            (Some(name), PatternFilter::Match) => match self.resource_type {
                Some(t) => binding.covers(t, name),
                None => binding.covers(binding.resource_type, name),
            },
        };
        name_matches
            && self
                .resource_type
                .is_none_or(|t| t == binding.resource_type)
            && self
                .principal
                .as_ref()
                .is_none_or(|p| *p == binding.principal)
            && self.host.as_ref().is_none_or(|h| *h == binding.host)
            && self.operation.is_none_or(|o| o == binding.operation)
            && self.permission.is_none_or(|p| p == binding.permission)
    }
}

/// The operations an ALLOW of `granted` permits.
fn permits(granted: Operation, asked: Operation) -> bool {
    use Operation::*;
    granted == All
        || granted == asked
        || (asked == Describe && matches!(granted, Read | Write | Delete | Alter))
        || (asked == DescribeConfigs && granted == AlterConfigs)
}

/// Kafka's decision for `principal` from `host` doing `operation` on the resource
/// `name` of `resource_type` under `acls`.
pub fn authorize(
    acls: &[AclBinding],
    principal: &str,
    host: &str,
    operation: Operation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    let relevant = || {
        acls.iter()
            .filter(move |b| b.covers(resource_type, name) && b.concerns(principal, host))
    };
    let denied = relevant().any(|b| {
        b.permission == Permission::Deny
            && (b.operation == Operation::All || b.operation == operation)
    });
    !denied
        && relevant().any(|b| b.permission == Permission::Allow && permits(b.operation, operation))
}

/// True when some ACL lets `principal` from `host` do `operation` on some resource of
/// `resource_type` (Kafka's rule for idempotent producers without a cluster grant: WRITE
/// on any topic).
pub fn allows_some(
    acls: &[AclBinding],
    principal: &str,
    host: &str,
    operation: Operation,
    resource_type: ResourceType,
) -> bool {
    acls.iter().any(|b| {
        b.resource_type == resource_type
            && b.concerns(principal, host)
            && b.permission == Permission::Allow
            && permits(b.operation, operation)
            && authorize(acls, principal, host, operation, resource_type, &b.name)
    })
}

/// Kafka's wire numbers for the ACL enums, both ways.
pub mod codes {
    use super::{Operation, PatternType, Permission, ResourceType};

    /// Kafka's number for a resource type.
    pub fn resource_type(t: ResourceType) -> i8 {
        match t {
            ResourceType::Topic => 2,
            ResourceType::Group => 3,
            ResourceType::Cluster => 4,
            ResourceType::TransactionalId => 5,
        }
    }

    /// The resource type Kafka numbers `n` (`None` for ANY, UNKNOWN and the rest).
    pub fn to_resource_type(n: i8) -> Option<ResourceType> {
        [
            ResourceType::Topic,
            ResourceType::Group,
            ResourceType::Cluster,
            ResourceType::TransactionalId,
        ]
        .into_iter()
        .find(|t| resource_type(*t) == n)
    }

    /// Kafka's number for a pattern type.
    pub fn pattern_type(p: PatternType) -> i8 {
        match p {
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }

    /// The pattern type Kafka numbers `n`.
    pub fn to_pattern_type(n: i8) -> Option<PatternType> {
        [PatternType::Literal, PatternType::Prefixed]
            .into_iter()
            .find(|p| pattern_type(*p) == n)
    }

    const OPERATIONS: [Operation; 11] = [
        Operation::All,
        Operation::Read,
        Operation::Write,
        Operation::Create,
        Operation::Delete,
        Operation::Alter,
        Operation::Describe,
        Operation::ClusterAction,
        Operation::DescribeConfigs,
        Operation::AlterConfigs,
        Operation::IdempotentWrite,
    ];

    /// Kafka's number for an operation (ALL is 2, READ 3, … IDEMPOTENT_WRITE 12).
    pub fn operation(o: Operation) -> i8 {
        OPERATIONS
            .iter()
            .position(|x| *x == o)
            .map_or(0, |i| i as i8 + 2)
    }

    /// The operation Kafka numbers `n`.
    pub fn to_operation(n: i8) -> Option<Operation> {
        OPERATIONS.into_iter().find(|o| operation(*o) == n)
    }

    /// Kafka's number for a permission.
    pub fn permission(p: Permission) -> i8 {
        match p {
            Permission::Deny => 2,
            Permission::Allow => 3,
        }
    }

    /// The permission Kafka numbers `n`.
    pub fn to_permission(n: i8) -> Option<Permission> {
        [Permission::Deny, Permission::Allow]
            .into_iter()
            .find(|p| permission(*p) == n)
    }

    /// Kafka's ANY, in every one of these enums.
    pub const ANY: i8 = 1;

    /// Kafka's MATCH pattern type (filters only).
    pub const MATCH: i8 = 2;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        t: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        operation: Operation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: t,
            name: name.into(),
            pattern,
            principal: principal.into(),
            host: "*".into(),
            operation,
            permission,
        }
    }

    #[test]
    fn deny_wins_and_some_operations_imply_describe() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let acls = vec![
            acl(Topic, "orders", Literal, "User:alice", Write, Allow),
            acl(Topic, "logs-", Prefixed, "User:*", Read, Allow),
            acl(Topic, "logs-secret", Literal, "User:bob", All, Deny),
            acl(Group, "*", Literal, "User:bob", Read, Allow),
            acl(Topic, "cfg", Literal, "User:bob", AlterConfigs, Allow),
        ];
        let can = |who: &str, op, t, name: &str| authorize(&acls, who, "10.0.0.1", op, t, name);
        assert!(can("User:alice", Write, Topic, "orders"));
        assert!(
            can("User:alice", Describe, Topic, "orders"),
            "WRITE implies DESCRIBE"
        );
        assert!(!can("User:alice", Read, Topic, "orders"));
        assert!(
            !can("User:alice", Write, Topic, "orders2"),
            "literal is exact"
        );
        assert!(can("User:bob", Read, Topic, "logs-app"), "prefix, any user");
        assert!(!can("User:bob", Read, Topic, "logs-secret"), "deny wins");
        assert!(
            !can("User:bob", Describe, Topic, "logs-secret"),
            "deny ALL denies all"
        );
        assert!(can("User:alice", Read, Topic, "logs-secret"));
        assert!(can("User:bob", Read, Group, "any-group"), "wildcard name");
        assert!(can("User:bob", DescribeConfigs, Topic, "cfg"));
        assert!(!can("User:carol", Read, Group, "g"));
        assert!(allows_some(&acls, "User:alice", "h", Write, Topic));
        assert!(!allows_some(&acls, "User:carol", "h", Write, Topic));
        let from_host = AclBinding {
            host: "10.0.0.9".into(),
            ..acl(Cluster, CLUSTER_NAME, Literal, "User:ops", Alter, Allow)
        };
        let acls = [from_host];
        assert!(authorize(
            &acls,
            "User:ops",
            "10.0.0.9",
            Alter,
            Cluster,
            CLUSTER_NAME
        ));
        assert!(!authorize(
            &acls,
            "User:ops",
            "10.0.0.1",
            Alter,
            Cluster,
            CLUSTER_NAME
        ));
    }

    #[test]
    fn filters_pick_bindings_as_kafka_does() {
        use PatternType::*;
        let a = acl(
            ResourceType::Topic,
            "logs-",
            Prefixed,
            "User:a",
            Operation::Read,
            Permission::Allow,
        );
        let b = acl(
            ResourceType::Topic,
            "logs-x",
            Literal,
            "User:a",
            Operation::Read,
            Permission::Allow,
        );
        let any = AclFilter {
            resource_type: None,
            name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        };
        assert!(any.matches(&a) && any.matches(&b));
        let matching = AclFilter {
            name: Some("logs-x".into()),
            pattern: PatternFilter::Match,
            ..any.clone()
        };
        assert!(matching.matches(&a) && matching.matches(&b));
        let literal = AclFilter {
            name: Some("logs-".into()),
            pattern: PatternFilter::Exactly(Literal),
            ..any.clone()
        };
        assert!(!literal.matches(&a) && !literal.matches(&b));
        let prefixed = AclFilter {
            pattern: PatternFilter::Exactly(Prefixed),
            ..any.clone()
        };
        assert!(prefixed.matches(&a) && !prefixed.matches(&b));
        let writes = AclFilter {
            operation: Some(Operation::Write),
            ..any
        };
        assert!(!writes.matches(&a));
        for n in 2..=12 {
            let o = codes::to_operation(n).expect("an operation");
            assert_eq!(codes::operation(o), n);
        }
        assert_eq!(codes::to_operation(codes::ANY), None);
    }
}
