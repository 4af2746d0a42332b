//! The `weir` command: `weir serve` runs the broker; the others administer a running
//! one (see `cli`).

mod cli;

/// Survives requests that claim absurd array lengths; see `weir::reserve_alloc`.
#[global_allocator]
static ALLOCATOR: weir::reserve_alloc::ReservingAllocator = weir::reserve_alloc::ReservingAllocator;

fn main() -> anyhow::Result<()> {
    cli::run()
}
