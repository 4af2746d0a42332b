//! The thread-per-core runtime: one glommio executor per shard, pinned to its core,
//! each with its own storage, partitions and listener. Shards share nothing on the
//! data path; the topic registry is the only state they all read.

mod background;
pub mod compactor;
pub mod context;
mod group_routing;
pub mod metadata_view;
mod metrics_publisher;
pub mod open_logs;
mod partitions;
mod peers;
pub mod replica_roles;
mod sasl_users;
pub mod signals;
mod strays;
pub mod tasks;
pub mod txn_marking;
pub mod txn_routing;

use std::rc::Rc;

use context::ShardContext;

/// What a started shard does before it serves: starts its background tasks and, on
/// shard 0 of a host with SASL, waits until the users exist, or anyway for at most
/// [`sasl_users::FIRST_TRY_MAX`] (a cluster host without a controller keeps trying
/// meanwhile, as a task of the shard's).
pub async fn prepare(ctx: &Rc<ShardContext>) {
    background::start(ctx);
    if ctx.id.0 != 0 || ctx.config.sasl.is_none() {
        return;
    }
    let mut users = glommio::spawn_local(sasl_users::ensure(Rc::downgrade(ctx)));
    let done = futures_lite::future::or(
        async {
            (&mut users).await;
            true
        },
        async {
            glommio::timer::sleep(sasl_users::FIRST_TRY_MAX).await;
            false
        },
    )
    .await;
    if !done {
        ctx.tasks.adopt("sasl users", users.detach());
    }
}
