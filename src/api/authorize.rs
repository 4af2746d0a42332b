//! What a request's principal may do: with `--authorizer acl`, the connection's
//! principal (`User:NAME` after a SASL login, `User:ANONYMOUS` otherwise) from the
//! client's address, checked against the ACLs of the shard's metadata; super users and
//! brokers without an authorizer allow everything. Handlers take one [`Access`] per
//! request and ask it per resource, answering each refused one with its own error.

use std::sync::Arc;

use crate::{
    security::acl::{self, AclBinding, Operation, ResourceType, CLUSTER_NAME},
    shard::context::ShardContext,
};

use super::Call;

/// One request's rights.
#[derive(Debug)]
pub struct Access {
    /// `None`: everything is allowed.
    rule: Option<Rule>,
}

#[derive(Debug)]
struct Rule {
    principal: String,
    host: String,
    acls: Arc<Vec<AclBinding>>,
}

impl Access {
    /// The rights of `call`'s principal under the ACLs as this shard last saw them
    /// (refreshed first: a change reaches requests as soon as it reaches the host).
    pub async fn of(ctx: &ShardContext, call: &Call) -> Access {
        let Some(authorizer) = &ctx.config.authorizer else {
            return Access { rule: None };
        };
        let principal = call.session.principal().unwrap_or_default();
        if authorizer.super_users.contains(&principal) {
            return Access { rule: None };
        }
        ctx.resync().await;
        let acls = Arc::clone(&ctx.metadata().view.acls);
        let host = call
            .session
            .peer()
            .map_or_else(String::new, |p| p.ip().to_string());
        Access {
            rule: Some(Rule {
                principal,
                host,
                acls,
            }),
        }
    }

    /// True when `operation` on resource `name` of `resource_type` is allowed.
    pub fn allows(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        self.rule.as_ref().is_none_or(|r| {
            acl::authorize(
                &r.acls,
                &r.principal,
                &r.host,
                operation,
                resource_type,
                name,
            )
        })
    }

    /// True when `operation` on topic `name` is allowed.
    pub fn topic(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Topic, name)
    }

    /// True when `operation` on group `name` is allowed.
    pub fn group(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Group, name)
    }

    /// True when `operation` on transactional id `id` is allowed.
    pub fn transactional_id(&self, operation: Operation, id: &str) -> bool {
        self.allows(operation, ResourceType::TransactionalId, id)
    }

    /// True when `operation` on the cluster is allowed.
    pub fn cluster(&self, operation: Operation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// True when `operation` is allowed on some topic (an idempotent producer without
    /// IDEMPOTENT_WRITE on the cluster needs WRITE on one, as in Kafka).
    pub fn some_topic(&self, operation: Operation) -> bool {
        self.rule.as_ref().is_none_or(|r| {
            acl::allows_some(
                &r.acls,
                &r.principal,
                &r.host,
                operation,
                ResourceType::Topic,
            )
        })
    }
}
