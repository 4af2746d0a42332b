//! Hosts on a network of their own, whose links a test can cut: one network namespace
//! per host, each joined to a bridge in the test's namespace by a veth pair. Host `n`
//! has address `10.213.<net>.<n>`; the test process reaches every host through the
//! bridge (address `.254`). Cutting a host's link takes its veth end down on the bridge
//! side: packets to and from it are dropped silently (no refusal, no reset), as a
//! failed switch port would. Everything is deleted on drop. Needs root (`ip netns`).

use std::process::Command;

/// The namespaces, veth pairs and bridge of one test.
pub struct Network {
    tag: String,
    net: u8,
    hosts: u32,
}

/// Runs `ip ARGS`; panics with its error output if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {} (network namespaces need root and iproute2)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Network {
    /// Creates namespaces for hosts `1..=hosts`, linked and up.
    pub fn new(hosts: u32) -> Network {
        let pid = std::process::id();
        let net = Network {
            tag: format!("{}", pid % 100_000),
            net: (pid % 200) as u8 + 20,
            hosts,
        };
        net.remove();
        let bridge = net.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&[
            "addr",
            "add",
            &format!("10.213.{}.254/24", net.net),
            "dev",
            &bridge,
        ]);
        ip(&["link", "set", &bridge, "up"]);
        for id in 1..=hosts {
            let ns = net.namespace(id);
            let outer = net.veth(id);
            ip(&["netns", "add", &ns]);
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ]);
            ip(&["link", "set", &outer, "master", &bridge]);
            ip(&["link", "set", &outer, "up"]);
            let addr = format!("{}/24", net.ip(id));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        net
    }

    /// Host `id`'s namespace.
    pub fn namespace(&self, id: u32) -> String {
        format!("weir-{}-{id}", self.tag)
    }

    /// Host `id`'s address.
    pub fn ip(&self, id: u32) -> String {
        format!("10.213.{}.{id}", self.net)
    }

    fn bridge(&self) -> String {
        format!("wbr{}", self.tag)
    }

    fn veth(&self, id: u32) -> String {
        format!("wv{}-{id}", self.tag)
    }

    /// Cuts host `id` off from every other host and from the test process.
    pub fn cut(&self, id: u32) {
        ip(&["link", "set", &self.veth(id), "down"]);
    }

    /// Joins host `id` again.
    pub fn heal(&self, id: u32) {
        ip(&["link", "set", &self.veth(id), "up"]);
    }

    /// `program` to be run inside host `id`'s namespace.
    pub fn command_in(&self, id: u32, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.namespace(id)]).arg(program);
        c
    }

    /// Deletes whatever of this network exists (also a previous run's leftovers under
    /// the same tag).
    fn remove(&self) {
        for id in 1..=self.hosts {
            // Deleting a namespace deletes its veth end, and with it the pair.
            let _ = Command::new("ip")
                .args(["netns", "delete", &self.namespace(id)])
                .stderr(std::process::Stdio::null())
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "delete", &self.bridge()])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.remove();
    }
}
