//! A Linux test guest ([`netadm_guest`], re-exported whole) and netadm
//! inside one: for what this host's kernel cannot run (bonding, 802.1Q,
//! e1000e), netadmd manages the guest's NICs as kernel ports.
//!
//! [`with_netadm`] adds to a [`GuestConfig`] what netadm needs there:
//! `netadmd` and `netadm` (stripped of debug information, with their
//! libraries), `dbus-daemon` and a bus configuration allowing everything,
//! a hardware configuration naming the guest's NICs as kernel ports, and
//! `/netadm-guest/netadm.sh`, whose `netadm_start` starts the bus and
//! netadmd (waiting, with a deadline, for the line netadmd prints once it
//! serves) and exports `NETADM_BUS` for the `netadm` calls after it.
//!
//! ```no_run
//! use std::time::Duration;
//! use netadm_testkit::guest::{self, GuestConfig, Nic};
//!
//! let script = ". /netadm-guest/netadm.sh; netadm_start; netadm show-phys";
//! let cfg = GuestConfig::new(script).netns("my-ns").nic(Nic::virtio("t0"));
//! let out = guest::with_netadm(cfg, &netadm_testkit::bin_dir(), &[("net0", "eth0")])
//!     .run(Duration::from_secs(120))?;
//! assert_eq!(out.code, 0, "{}", out.transcript());
//! # Ok::<(), netadm_testkit::guest::Error>(())
//! ```

use std::path::Path;

pub use netadm_guest::*;

/// The guest's hardware configuration (`netadmd --config`).
pub const HARDWARE: &str = "/etc/netadm/hw.toml";
/// The shell functions that start netadm in the guest.
pub const NETADM_SH: &str = "/netadm-guest/netadm.sh";
/// The bus's socket in the guest; `NETADM_BUS` is `unix:path=` it.
pub const BUS_SOCKET: &str = "/run/netadm-bus";
/// Host programs [`with_netadm`] carries or runs, with their Debian
/// packages, for [`missing_prerequisites`].
pub const TOOLS: &[(&str, &str)] = &[("dbus-daemon", "dbus-daemon"), ("strip", "binutils")];

/// What `netadm.sh` holds. netadmd's log is `/tmp/netadmd.log`; a start
/// that fails prints it.
const NETADM_SH_TEXT: &str = r#"# netadm in the guest: . /netadm-guest/netadm.sh (after lib.sh)
. /netadm-guest/lib.sh
export NETADM_BUS=unix:path=/run/netadm-bus
# netadm_start [ARGS...]: the bus, then netadmd on it (ARGS added), and a
# wait of at most 60 s for it to serve.
netadm_start() {
    mkdir -p /var/lib/netadm /run
    if [ ! -S /run/netadm-bus ]; then
        /usr/bin/dbus-daemon --config-file=/netadm-guest/bus.conf --nofork >/tmp/dbus.log 2>&1 &
        wait_for 30 test -S /run/netadm-bus || { cat /tmp/dbus.log; return 1; }
    fi
    /usr/sbin/netadmd --bus "$NETADM_BUS" --config /etc/netadm/hw.toml \
        --state-dir /var/lib/netadm "$@" >>/tmp/netadmd.log 2>&1 &
    NETADMD_PID=$!
    if ! wait_for 60 grep -q 'serving org.netadm.Netadm1' /tmp/netadmd.log; then
        echo "netadmd did not serve:"; cat /tmp/netadmd.log; return 1
    fi
}
# netadm_stop: SIGTERM to netadmd, and a wait of at most 30 s for it to go.
netadm_stop() {
    kill "$NETADMD_PID" 2>/dev/null
    wait_for 30 eval '! kill -0 $NETADMD_PID 2>/dev/null'
}
# carrying: both ports of aggr0 attached.
carrying() { netadm show-aggr -x -p -o port,portstate aggr0 | grep -c ':attached$' | grep -qx 2; }
# aggr_up LACP: aggr0 over net0 and net1 (LACP mode LACP, short timer,
# hashing L3,L4) with 192.0.2.2/24, waited for until both ports carry
# and the host (192.0.2.1) answers.
aggr_up() {
    netadm create-aggr -L "$1" -T short -P L3,L4 -l net0 -l net1 aggr0
    netadm create-if aggr0
    netadm create-addr -T static -a 192.0.2.2/24 aggr0/v4
    wait_for 90 carrying
    wait_for 30 ping -c 1 -W 1 192.0.2.1
}
"#;

/// The bus configuration: a session-type bus on [`BUS_SOCKET`] that
/// allows everything (netadmd's own authorization still applies; the
/// guest runs as root).
const BUS_CONF: &str = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=/run/netadm-bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#;

/// The hardware configuration of kernel ports `ports` (link name, the
/// guest's device), in order.
pub fn kernel_ports(ports: &[(&str, &str)]) -> String {
    ports
        .iter()
        .map(|(name, dev)| {
            format!("[[port]]\nname = \"{name}\"\nclass = \"kernel\"\ninterface = \"{dev}\"\n")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A guest for tests of links: `script` with `memory_mib` MiB, its taps in
/// namespace `netns`, iproute2's ip, ethtool and ping, and the bonding
/// driver making no bond of its own (netadm makes them).
pub fn for_links(script: &str, netns: &str, memory_mib: u32) -> GuestConfig {
    GuestConfig::new(script)
        .netns(netns)
        .memory_mib(memory_mib)
        .binary("ip")
        .binary("ethtool")
        .binary("ping")
        .module_params("bonding", "max_bonds=0")
}

/// `cfg` with netadm in it: `netadmd` and `netadm` from `bins` (a
/// workspace's `target/PROFILE`, [`crate::bin_dir`]) at `/usr/sbin` and
/// `/usr/bin`, `dbus-daemon`, the bus configuration, the hardware
/// configuration of kernel ports `ports` (link name, guest device), and
/// [`NETADM_SH`]. Modules come too: `tun` (netadmd's kernel mirror opens
/// `/dev/net/tun`) and what netadm's tc needs.
pub fn with_netadm(cfg: GuestConfig, bins: &Path, ports: &[(&str, &str)]) -> GuestConfig {
    let bin = |n: &str| bins.join(n).to_string_lossy().into_owned();
    cfg.binary_stripped(&bin("netadmd"), "/usr/sbin/netadmd")
        .binary_stripped(&bin("netadm"), "/usr/bin/netadm")
        .binary("dbus-daemon")
        .data("/netadm-guest/bus.conf", BUS_CONF, 0o644)
        .data(HARDWARE, kernel_ports(ports), 0o644)
        .data(NETADM_SH, NETADM_SH_TEXT, 0o644)
        .data("/etc/machine-id", "6e6574616d2d67756573742d30303031\n", 0o444)
        .module("tun")
        // tc: a bond's frames steered off a member while its MTU changes
        // (clsact, u32, mirred).
        .module("sch_ingress")
        .module("cls_u32")
        .module("act_mirred")
}

/// Keeps the kernel of network namespace `ns` from answering ARP on taps
/// `taps` (`arp_ignore` 8) when netadm's afpacket wires carry them into a
/// host netadmd there: with its default the namespace's kernel answers
/// for the interface netadmd mirrors into it from the tap itself, with
/// the tap's MAC, beside netadm's answer; the guest's neighbour entry
/// then flips between the two, and frames to the tap's MAC are lost once
/// they leave by the other tap.
pub fn afpacket_taps(ns: &str, taps: &[&str]) -> std::io::Result<()> {
    crate::netns::enter(ns, || {
        taps.iter().try_for_each(|t| {
            std::fs::write(format!("/proc/sys/net/ipv4/conf/{t}/arp_ignore"), "8")
        })
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn kernel_ports_as_the_hardware_file_has_them() {
        let hw = super::kernel_ports(&[("net0", "eth0"), ("net1", "eth1")]);
        assert_eq!(
            hw,
            "[[port]]\nname = \"net0\"\nclass = \"kernel\"\ninterface = \"eth0\"\n\n\
             [[port]]\nname = \"net1\"\nclass = \"kernel\"\ninterface = \"eth1\"\n"
        );
    }
}
