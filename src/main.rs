//! The `weir` command: `weir serve` runs the broker; the others administer a running
//! one (see `cli`).

mod cli;

/// Survives requests that claim absurd array lengths; see `weir::reserve_alloc`.
#[global_allocator]
static ALLOCATOR: weir::reserve_alloc::ReservingAllocator = weir::reserve_alloc::ReservingAllocator;

/// jemalloc's options; see `weir::reserve_alloc::MALLOC_CONF`.
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: weir::reserve_alloc::MallocConf = weir::reserve_alloc::MALLOC_CONF;

fn main() -> anyhow::Result<()> {
    cli::run()
}
