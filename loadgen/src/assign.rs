//! How partitions are dealt out, to clients of one run and to members of a group.

/// The partitions client `client` of `clients` uses: every `clients`-th one, or, with
/// more clients than partitions, one partition shared with other clients.
pub fn partitions_of(partitions: &[i32], client: usize, clients: usize) -> Vec<i32> {
    if partitions.is_empty() {
        return Vec::new();
    }
    if clients > partitions.len() {
        return vec![partitions[client % partitions.len()]];
    }
    partitions
        .iter()
        .skip(client)
        .step_by(clients)
        .copied()
        .collect()
}
