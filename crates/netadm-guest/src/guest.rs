//! Configuring, booting and watching a guest.
//!
//! Lifecycle: [`GuestConfig`] says what the guest is; [`GuestConfig::prepare`]
//! makes the kernel cache ready, builds the initramfs and creates the taps
//! ([`Prepared`]: the caller may now configure the host side of the taps);
//! [`Prepared::boot`] spawns QEMU ([`Guest`]); [`Guest::wait`] ends in an
//! [`Outcome`]. Dropping a `Guest` or `Prepared` kills QEMU and deletes the
//! taps.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::modules::ModuleTree;
use crate::nic::{Checked, Nic, NicModel, Taps, mac_text};
use crate::qemu::{self, Accel};
use crate::running::{Guest, Outcome, Prepared, Timings};
use crate::{Error, cache, initramfs};

/// What a guest is: its NICs, modules, programs, files and the test's
/// script. Built by chaining; nothing happens until [`prepare`](Self::prepare).
#[derive(Debug, Clone)]
pub struct GuestConfig {
    script: String,
    netns: Option<String>,
    nics: Vec<Nic>,
    modules: Vec<String>,
    module_params: std::collections::BTreeMap<String, String>,
    /// (program, guest path, stripped of debug information).
    binaries: Vec<(String, Option<String>, bool)>,
    files: Vec<(String, FileSource)>,
    memory_mib: u32,
    cpus: u32,
    accel: Accel,
    cmdline: Vec<String>,
}

#[derive(Debug, Clone)]
enum FileSource {
    Host(PathBuf),
    Data(u32, Vec<u8>),
}

impl GuestConfig {
    /// A guest that runs `script` (busybox sh) as its test; its exit status
    /// is the guest's. Defaults: no NICs, 512 MiB, one CPU, [`Accel::Auto`].
    pub fn new(script: impl Into<String>) -> Self {
        GuestConfig {
            script: script.into(),
            netns: None,
            nics: vec![],
            modules: vec![],
            module_params: Default::default(),
            binaries: vec![],
            files: vec![],
            memory_mib: 512,
            cpus: 1,
            accel: Accel::Auto,
            cmdline: vec![],
        }
    }

    /// The host network namespace (made by the caller) where the taps are
    /// created and QEMU runs. Required with NICs: nothing is made in the
    /// host's own namespace.
    pub fn netns(mut self, name: &str) -> Self {
        self.netns = Some(name.into());
        self
    }

    /// Adds a NIC. Its driver's modules are added too.
    pub fn nic(mut self, nic: Nic) -> Self {
        self.nics.push(nic);
        self
    }

    /// A module /init loads (with its dependencies) before the script.
    pub fn module(mut self, name: &str) -> Self {
        self.modules.push(name.into());
        self
    }

    /// A module loaded with insmod parameters `params` (space-separated
    /// `name=value`), e.g. `("bonding", "max_bonds=0")` so that loading it
    /// makes no bond0.
    pub fn module_params(mut self, name: &str, params: &str) -> Self {
        self.modules.push(name.into());
        self.module_params.insert(name.replace('-', "_"), params.into());
        self
    }

    /// A host program (a name looked up on PATH, or a path), with its
    /// shared libraries, at the same path in the guest: `binary("ip")` is
    /// `/usr/sbin/ip` there, which busybox's `ip` never shadows.
    pub fn binary(mut self, program: &str) -> Self {
        self.binaries.push((program.into(), None, false));
        self
    }

    /// A host program (name or path) at `guest_path` in the guest, with its
    /// shared libraries (e.g. `target/release/netadmd` as `/usr/sbin/netadmd`).
    pub fn binary_at(mut self, program: &str, guest_path: &str) -> Self {
        self.binaries.push((program.into(), Some(guest_path.into()), false));
        self
    }

    /// [`binary_at`](Self::binary_at) with its debug information stripped
    /// on the way in (`strip --strip-debug`, binutils): a debug build of
    /// netadmd is 200 MB, of which the guest needs 40, and the initramfs
    /// is held in the guest's memory.
    pub fn binary_stripped(mut self, program: &str, guest_path: &str) -> Self {
        self.binaries.push((program.into(), Some(guest_path.into()), true));
        self
    }

    /// A host file copied to `guest_path` (its permission bits kept).
    pub fn file(mut self, host: impl AsRef<Path>, guest_path: &str) -> Self {
        self.files.push((guest_path.into(), FileSource::Host(host.as_ref().to_owned())));
        self
    }

    /// A file of `bytes` at `guest_path` with permission bits `mode`.
    pub fn data(mut self, guest_path: &str, bytes: impl Into<Vec<u8>>, mode: u32) -> Self {
        self.files.push((guest_path.into(), FileSource::Data(mode, bytes.into())));
        self
    }

    /// Guest memory in MiB.
    pub fn memory_mib(mut self, mib: u32) -> Self {
        self.memory_mib = mib;
        self
    }

    /// Guest CPUs.
    pub fn cpus(mut self, n: u32) -> Self {
        self.cpus = n;
        self
    }

    /// How QEMU runs the CPU.
    pub fn accel(mut self, accel: Accel) -> Self {
        self.accel = accel;
        self
    }

    /// One more kernel command-line argument.
    pub fn cmdline(mut self, arg: &str) -> Self {
        self.cmdline.push(arg.into());
        self
    }

    /// Prepares and boots ([`prepare`](Self::prepare), then
    /// [`Prepared::boot`]).
    pub fn launch(&self) -> Result<Guest, Error> {
        self.prepare()?.boot()
    }

    /// Launches and waits up to `within` for the script to end.
    pub fn run(&self, within: Duration) -> Result<Outcome, Error> {
        self.launch()?.wait(within)
    }

    /// Checks the configuration, makes the kernel and busybox cache ready
    /// (fetching on first use), builds the initramfs and creates the taps,
    /// up, in the namespace. Nothing is left behind on error.
    pub fn prepare(&self) -> Result<Prepared, Error> {
        let started = Instant::now();
        let nics = self.checked_nics()?;
        if let Some(ns) = &self.netns
            && !Path::new("/run/netns").join(ns).exists()
        {
            return Err(Error::BadConfig(format!(
                "network namespace {ns:?} does not exist (ip netns add)"
            )));
        }
        let qemu = find_program("qemu-system-x86_64")?;
        let kernel = cache::kernel()?;
        let busybox = cache::busybox()?;
        let accel = qemu::resolve_accel(self.accel, &kernel, kvm_probe)?;
        let cache_ready = started.elapsed();

        let mut modules: Vec<String> = vec![];
        for n in &nics {
            let need: &[&str] = match n.model {
                NicModel::VirtioNet => &["virtio_pci", "virtio_net"],
                NicModel::E1000e => &["e1000e"],
            };
            modules.extend(need.iter().map(|m| m.to_string()));
        }
        modules.extend(self.modules.iter().cloned());
        let tree = ModuleTree::read(&kernel.modules)?;
        let dir = tempfile::Builder::new()
            .prefix("netadm-guest.")
            .tempdir()
            .map_err(|e| Error::io(&std::env::temp_dir(), e))?;
        let mut binaries = vec![];
        for (i, (program, at, strip)) in self.binaries.iter().enumerate() {
            let mut host = find_program(program)?;
            if *strip {
                let out = dir.path().join(format!("stripped-{i}"));
                let (h, o) = (host.to_string_lossy(), out.to_string_lossy());
                cache::run("strip", &["--strip-debug", "-o", &o, &h], None)?;
                host = out;
            }
            let guest = at.clone().unwrap_or_else(|| host.to_string_lossy().into_owned());
            if !guest.starts_with('/') {
                return Err(Error::BadConfig(format!(
                    "guest path {guest:?} of {program} is not absolute"
                )));
            }
            binaries.push((host, guest));
        }
        let mut files = vec![];
        for (guest, src) in &self.files {
            if !guest.starts_with('/') {
                return Err(Error::BadConfig(format!("guest path {guest:?} is not absolute")));
            }
            let (mode, data) = match src {
                FileSource::Host(p) => {
                    use std::os::unix::fs::PermissionsExt;
                    let m = std::fs::metadata(p).map_err(|e| Error::io(p, e))?.permissions().mode();
                    (m & 0o7777, std::fs::read(p).map_err(|e| Error::io(p, e))?)
                }
                FileSource::Data(m, d) => (*m, d.clone()),
            };
            files.push((guest.clone(), mode, data));
        }
        let initrd = dir.path().join("initramfs.cpio");
        let macs: Vec<(String, String)> =
            nics.iter().map(|n| (mac_text(n.mac), n.name.clone())).collect();
        let built = initramfs::build(
            &initramfs::Contents {
                busybox: &busybox,
                modules: &tree,
                wanted_modules: &modules,
                module_params: &self.module_params,
                binaries: &binaries,
                files,
                nics: &macs,
                script: &self.script,
            },
            &initrd,
        )?;
        let initramfs_built = started.elapsed() - cache_ready;
        let args = qemu::command(&qemu::Machine {
            qemu: &qemu,
            netns: self.netns.as_deref(),
            accel,
            image: &kernel.image,
            initrd: &initrd,
            memory_mib: self.memory_mib,
            cpus: self.cpus,
            cmdline: &self.cmdline,
            nics: &nics,
        });
        let taps = Taps::create(self.netns.as_deref(), &nics)?;

        Ok(Prepared {
            args,
            taps,
            dir,
            kernel,
            accel,
            timings: Timings {
                cache_ready,
                initramfs_built,
                initramfs_bytes: built.bytes,
                ..Timings::default()
            },
            modules: built.modules,
        })
    }

    /// The NICs with names and MACs filled in, checked: a namespace named,
    /// tap and guest names the kernel takes, each once.
    fn checked_nics(&self) -> Result<Vec<Checked>, Error> {
        static GUESTS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
        let guest_no = GUESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !self.nics.is_empty() && self.netns.is_none() {
            return Err(Error::BadConfig(
                "NICs need a network namespace (GuestConfig::netns): taps are never made in the host's".into(),
            ));
        }
        if let Some((m, p)) = self
            .module_params
            .iter()
            .find(|(_, p)| !p.chars().all(|c| c.is_ascii_alphanumeric() || " =,._-:/".contains(c)))
        {
            return Err(Error::BadConfig(format!(
                "module {m} parameters {p:?}: only letters, digits, space and =,._-:/"
            )));
        }
        if self.cpus == 0 || self.memory_mib < 128 {
            return Err(Error::BadConfig(format!(
                "{} CPUs, {} MiB: needs >= 1 CPU, >= 128 MiB",
                self.cpus, self.memory_mib
            )));
        }
        let ifname = |what: &str, n: &str| {
            if n.is_empty()
                || n.len() > 15
                || n.contains(|c: char| c == '/' || c == ':' || c.is_whitespace() || c == '\0')
            {
                Err(Error::BadConfig(format!(
                    "{what} {n:?} is not a Linux interface name (1-15 chars, no '/', ':', space)"
                )))
            } else {
                Ok(())
            }
        };
        let mut out: Vec<Checked> = vec![];
        for (i, n) in self.nics.iter().enumerate() {
            match (n.model, n.queues) {
                (NicModel::E1000e, 1) | (NicModel::VirtioNet, 1..=16) => {}
                (NicModel::E1000e, q) => {
                    return Err(Error::BadConfig(format!(
                        "e1000e NIC on tap {}: {q} queues (it has one)",
                        n.tap
                    )));
                }
                (NicModel::VirtioNet, q) => {
                    return Err(Error::BadConfig(format!(
                        "NIC on tap {}: {q} queues (1 to 16)",
                        n.tap
                    )));
                }
            }
            let name = n.name.clone().unwrap_or_else(|| format!("eth{i}"));
            ifname("tap", &n.tap)?;
            ifname("guest NIC name", &name)?;
            let pid = std::process::id();
            let mac = n.mac.unwrap_or([0x52, 0x54, 0x00, pid as u8, guest_no, i as u8 + 1]);
            if mac[0] & 1 == 1 {
                return Err(Error::BadConfig(format!("MAC {} is multicast", mac_text(mac))));
            }
            if let Some(dup) = out.iter().find(|o| o.tap == n.tap || o.name == name || o.mac == mac)
            {
                return Err(Error::BadConfig(format!(
                    "NICs {} and {} share a tap, guest name or MAC",
                    dup.tap, n.tap
                )));
            }
            out.push(Checked { model: n.model, queues: n.queues, tap: n.tap.clone(), name, mac });
        }
        Ok(out)
    }
}

/// Boots the kernel under KVM with nothing but busybox: "kvm" when the
/// guest ran, else "tcg (why)".
fn kvm_probe() -> String {
    let probe = GuestConfig::new("echo kvm works").accel(Accel::Kvm).memory_mib(128);
    match probe.run(Duration::from_secs(10)) {
        Ok(o) if o.code == 0 && o.script_output().contains(&"kvm works") => "kvm".to_string(),
        Ok(o) => format!("tcg (the KVM guest's script: status {})", o.code),
        Err(e) => {
            // What QEMU said last is the reason (an assertion on an MSR,
            // "emulation failure"), else the error's first line.
            let why = e
                .transcript()
                .and_then(|t| t.qemu_stderr.last().cloned())
                .unwrap_or_else(|| e.to_string().lines().next().unwrap_or_default().to_owned());
            format!("tcg (the KVM guest failed: {})", why.replace('\n', " "))
        }
    }
}

/// A program's path: itself if it has a `/`, else the first on PATH.
pub(crate) fn find_program(program: &str) -> Result<PathBuf, Error> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(Error::Binary { program: program.into(), why: "no such file".into() })
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| Error::Binary { program: program.into(), why: "not on PATH".into() })
}

/// What a guest's prerequisites lack on this host, each with what supplies
/// it, and of `tools` (program, Debian package: what the test carries into
/// the guest or runs beside it); empty when a guest can boot. Tests skip
/// (or under `CI=true`, fail) on a non-empty list.
pub fn missing_prerequisites(tools: &[(&str, &str)]) -> Vec<String> {
    let mut missing = vec![];
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        missing.push("root (taps, network namespaces, the cache in /var/cache)".into());
    }
    for (tool, package) in [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("apt-get", "apt"),
        ("apt-cache", "apt"),
        ("dpkg", "dpkg"),
        ("xz", "xz-utils"),
        ("ldd", "libc-bin"),
        ("ip", "iproute2"),
    ]
    .iter()
    .chain(tools)
    {
        if find_program(tool).is_err() {
            missing.push(format!("{tool} (apt-get install {package})"));
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_configurations_are_refused_before_anything_is_made() {
        let e =
            GuestConfig::new("true").nic(Nic::virtio("t0")).checked_nics().unwrap_err().to_string();
        assert!(e.contains("need a network namespace"), "{e}");
        let e = GuestConfig::new("true")
            .netns("netadm-guest-no-such-ns")
            .nic(Nic::virtio("t0"))
            .prepare();
        assert!(e.err().unwrap().to_string().contains("does not exist"));
        let e = GuestConfig::new("true").memory_mib(64).checked_nics().unwrap_err().to_string();
        assert!(e.contains("128 MiB"), "{e}");
        let e = GuestConfig::new("true").module_params("bonding", "x=$(reboot)").checked_nics();
        assert!(e.unwrap_err().to_string().contains("module bonding parameters"));
    }

    #[test]
    fn nic_names_macs_and_queues_are_checked() {
        let cfg = |n: Nic| GuestConfig::new("true").netns("n").nic(n).checked_nics();
        assert!(cfg(Nic::e1000e("t0").queues(4)).unwrap_err().to_string().contains("it has one"));
        assert!(cfg(Nic::virtio("t0").queues(0)).unwrap_err().to_string().contains("1 to 16"));
        assert!(cfg(Nic::virtio("t0").queues(17)).unwrap_err().to_string().contains("1 to 16"));
        assert!(
            cfg(Nic::virtio("a/b")).unwrap_err().to_string().contains("not a Linux interface name")
        );
        assert!(cfg(Nic::virtio("t0").named("x".repeat(16).as_str())).is_err());
        assert!(
            cfg(Nic::virtio("t0").mac([1, 0, 0, 0, 0, 1]))
                .unwrap_err()
                .to_string()
                .contains("multicast")
        );
        let two = GuestConfig::new("true")
            .netns("n")
            .nic(Nic::virtio("t0"))
            .nic(Nic::e1000e("t0"))
            .checked_nics();
        assert!(two.unwrap_err().to_string().contains("share"));
        let ok = GuestConfig::new("true")
            .netns("n")
            .nic(Nic::virtio("t0").queues(4))
            .nic(Nic::e1000e("t1").named("lan"))
            .checked_nics()
            .unwrap();
        assert_eq!((ok[0].name.as_str(), ok[1].name.as_str()), ("eth0", "lan"));
        assert_eq!(ok[0].queues, 4);
        assert_ne!(ok[0].mac, ok[1].mac);
    }
}
