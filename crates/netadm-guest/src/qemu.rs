//! QEMU's command line for a guest, and which accelerator it gets.

use std::path::Path;

use crate::nic::{Checked, NicModel, mac_text};
use crate::{Error, cache};

/// How QEMU runs the guest's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM where a probe (one per host boot, cached) shows it works, else
    /// TCG. `NETADM_GUEST_ACCEL=tcg|kvm` in the environment decides instead.
    Auto,
    /// QEMU's emulator, multi-threaded.
    Tcg,
    /// The host's KVM, `-cpu host`.
    Kvm,
}

/// The kernel command line: serial console, no reboot on panic (QEMU's
/// `-no-reboot` then exits), and what shortens boot under TCG: no
/// mitigations or LSMs to set up, no i8042 probe, no crypto self-tests,
/// no TSC watchdog, expedited RCU (also quickens netdev teardown).
const CMDLINE: &str = "console=ttyS0 panic=-1 quiet mitigations=off lsm=capability i8042.noaux i8042.nokbd \
                       i8042.nopnp cryptomgr.notests tsc=reliable no_timer_check rcupdate.rcu_expedited=1 \
                       8250.nr_uarts=1";
/// qboot, QEMU's minimal firmware (qemu-system-data): boots faster than
/// SeaBIOS and prints nothing.
const QBOOT: &str = "/usr/share/qemu/qboot.rom";

/// What [`command`] needs to know.
pub(crate) struct Machine<'a> {
    pub qemu: &'a Path,
    pub netns: Option<&'a str>,
    pub accel: Accel,
    pub image: &'a Path,
    pub initrd: &'a Path,
    pub memory_mib: u32,
    pub cpus: u32,
    pub cmdline: &'a [String],
    pub nics: &'a [Checked],
}

/// The command that runs the guest: `ip netns exec NS` (with a namespace)
/// then QEMU and its arguments. No defaults, no display, the serial port
/// on stdio, exit instead of reboot.
pub(crate) fn command(m: &Machine<'_>) -> Vec<String> {
    let mut args: Vec<String> = vec![];
    if let Some(ns) = m.netns {
        args.extend(["ip", "netns", "exec", ns].map(String::from));
    }
    args.push(m.qemu.to_string_lossy().into_owned());
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    args.extend(s(&[
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-serial",
        "stdio",
        "-no-reboot",
    ]));
    args.extend(s(&["-machine", "pc"]));
    match m.accel {
        Accel::Kvm => args.extend(s(&["-accel", "kvm", "-cpu", "host"])),
        _ => args.extend(s(&["-accel", "tcg,thread=multi"])),
    }
    if Path::new(QBOOT).is_file() {
        args.extend(s(&["-bios", QBOOT]));
    }
    args.extend(["-m".into(), format!("{}M", m.memory_mib), "-smp".into(), m.cpus.to_string()]);
    args.extend(["-kernel".into(), m.image.to_string_lossy().into_owned()]);
    args.extend(["-initrd".into(), m.initrd.to_string_lossy().into_owned()]);
    let mut cmdline = CMDLINE.to_string();
    for a in m.cmdline {
        cmdline.push(' ');
        cmdline.push_str(a);
    }
    args.extend(["-append".into(), cmdline, "-nic".into(), "none".into()]);
    for (i, n) in m.nics.iter().enumerate() {
        let mac = mac_text(n.mac);
        // romfile= empty: no iPXE option ROM to load (the kernel is
        // booted directly). virtio-net reports a speed and duplex,
        // which it otherwise leaves unknown: the bonding driver keeps
        // an 802.3ad member down ("MII Status: down") without them.
        let (netdev, device) = match n.model {
            NicModel::VirtioNet => {
                let mut d = format!(
                    "virtio-net-pci,netdev=n{i},mac={mac},romfile=,speed=10000,duplex=full"
                );
                let mut q = String::new();
                if n.queues > 1 {
                    q = format!(",queues={}", n.queues);
                    d.push_str(&format!(",mq=on,vectors={}", 2 * n.queues + 2));
                }
                (q, d)
            }
            NicModel::E1000e => (String::new(), format!("e1000e,netdev=n{i},mac={mac},romfile=")),
        };
        args.push("-netdev".into());
        args.push(format!(
            "tap,id=n{i},ifname={},script=no,downscript=no,vhost=off{netdev}",
            n.tap
        ));
        args.push("-device".into());
        args.push(device);
    }
    args
}

/// [`Accel::Auto`] made definite: `NETADM_GUEST_ACCEL`, else TCG without
/// /dev/kvm, else the probe's verdict cached for this host boot
/// (`kvm-probe` in the cache: boot id and verdict). `probe` boots the
/// kernel under KVM with nothing but busybox; on this nested host KVM
/// guests fail ("emulation failure", or QEMU aborts setting an MSR).
pub(crate) fn resolve_accel(
    asked: Accel,
    kernel: &cache::Kernel,
    probe: impl FnOnce() -> String,
) -> Result<Accel, Error> {
    if asked != Accel::Auto {
        return Ok(asked);
    }
    match std::env::var("NETADM_GUEST_ACCEL").as_deref() {
        Ok("tcg") => return Ok(Accel::Tcg),
        Ok("kvm") => return Ok(Accel::Kvm),
        Ok("auto") | Ok("") | Err(_) => {}
        Ok(other) => {
            return Err(Error::BadConfig(format!("NETADM_GUEST_ACCEL={other} (tcg, kvm or auto)")));
        }
    }
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_err() {
        return Ok(Accel::Tcg);
    }
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let key = format!("{} {}", boot_id.trim(), kernel.release);
    let verdict_file = cache::cache_dir().join("kvm-probe");
    let _lock = cache::lock(&cache::cache_dir().join(".kvm-probe.lock"))?;
    if let Some(v) = std::fs::read_to_string(&verdict_file)
        .ok()
        .and_then(|t| t.strip_prefix(&format!("{key} ")).map(str::to_owned))
    {
        return Ok(if v.starts_with("kvm") { Accel::Kvm } else { Accel::Tcg });
    }
    let verdict = probe();
    std::fs::write(&verdict_file, format!("{key} {verdict}\n"))
        .map_err(|e| Error::io(&verdict_file, e))?;
    Ok(if verdict == "kvm" { Accel::Kvm } else { Accel::Tcg })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_nic_is_a_tap_netdev_and_a_device_without_option_rom() {
        let nic = |model, queues, tap: &str, mac| Checked {
            model,
            queues,
            tap: tap.into(),
            name: String::new(),
            mac,
        };
        let nics = [
            nic(NicModel::VirtioNet, 4, "t0", [0x52, 0x54, 0, 0, 0, 1]),
            nic(NicModel::E1000e, 1, "t1", [0x52, 0x54, 0, 0, 0, 2]),
        ];
        let args = command(&Machine {
            qemu: Path::new("/usr/bin/qemu-system-x86_64"),
            netns: Some("ns1"),
            accel: Accel::Tcg,
            image: Path::new("/k/vmlinux"),
            initrd: Path::new("/d/initramfs.cpio"),
            memory_mib: 256,
            cpus: 2,
            cmdline: &["extra=1".into()],
            nics: &nics,
        });
        assert_eq!(args[..4], ["ip", "netns", "exec", "ns1"]);
        let after = |flag: &str| -> Vec<&str> {
            args.windows(2).filter(|w| w[0] == flag).map(|w| w[1].as_str()).collect()
        };
        assert_eq!(after("-accel"), ["tcg,thread=multi"]);
        assert_eq!((after("-m"), after("-smp")), (vec!["256M"], vec!["2"]));
        assert!(after("-append")[0].starts_with("console=ttyS0 panic=-1 quiet "));
        assert!(after("-append")[0].ends_with(" extra=1"));
        assert_eq!(
            after("-netdev"),
            [
                "tap,id=n0,ifname=t0,script=no,downscript=no,vhost=off,queues=4",
                "tap,id=n1,ifname=t1,script=no,downscript=no,vhost=off",
            ]
        );
        assert_eq!(
            after("-device"),
            [
                "virtio-net-pci,netdev=n0,mac=52:54:00:00:00:01,romfile=,speed=10000,duplex=full,\
                 mq=on,vectors=10",
                "e1000e,netdev=n1,mac=52:54:00:00:00:02,romfile=",
            ]
        );
        assert_eq!(after("-nic"), ["none"]);
    }
}
