//! The guest's initramfs: busybox and its applet links, the modules, the
//! host binaries with their libraries, the test's files and script, and the
//! `/init` that runs them.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::Error;
use crate::cpio::{Archive, Entry};
use crate::modules::{ModuleTree, read_module};

/// Printed by /init as its first act: `NETADM-GUEST-INIT <uptime>`.
pub const INIT_MARK: &str = "NETADM-GUEST-INIT ";
/// Printed once the modules are loaded and the NICs named, just before the
/// script runs.
pub const READY_MARK: &str = "NETADM-GUEST-READY ";
/// Printed after the script: `NETADM-GUEST-EXIT <status>`.
pub const EXIT_MARK: &str = "NETADM-GUEST-EXIT ";
/// Printed when /init itself fails (a module, a NIC): `... <what>`.
pub const SETUP_FAILED_MARK: &str = "NETADM-GUEST-SETUP-FAILED ";

/// Where the script sits in the guest.
const SCRIPT: &str = "/netadm-guest/script.sh";
/// Shell helpers a script may source (`. /netadm-guest/lib.sh`).
const LIB: &str = "/netadm-guest/lib.sh";
/// What lib.sh holds: waits on a state with a deadline, for scripts that
/// must not sleep a fixed time.
const LIB_SH: &str = r#"# netadm-guest helpers: . /netadm-guest/lib.sh
# wait_for SECONDS COMMAND...: runs COMMAND every 0.1 s until it succeeds;
# after SECONDS (of guest uptime) prints "wait_for: timed out: COMMAND"
# and returns 1.
wait_for() {
    _wf_end=$(($(cut -d. -f1 /proc/uptime) + $1)); shift
    until "$@" >/dev/null 2>&1; do
        if [ "$(cut -d. -f1 /proc/uptime)" -ge "$_wf_end" ]; then
            echo "wait_for: timed out: $*"
            return 1
        fi
        /bin/busybox sleep 0.1
    done
}
# carrier IFACE: whether IFACE has carrier.
carrier() { [ "$(cat /sys/class/net/$1/carrier 2>/dev/null)" = 1 ]; }
"#;
/// Shell functions that put each carried program over busybox's applet of
/// the same name, sourced before the script. Debian's busybox is built to
/// prefer its applets: its shell runs the `ip` applet for a bare `ip`
/// whatever PATH says (the applet takes `type bond mode 802.3ad` and makes
/// a balance-rr bond without a word). A shell function comes before an
/// applet in its lookup.
const SHIMS: &str = "/netadm-guest/shims.sh";

/// Where the modules sit in the guest (insmod needs a file, not a name).
const MODULE_DIR: &str = "/lib/modules/netadm-guest";

/// Applets a script never gets by these names: it must get the real tool
/// (carried with `GuestConfig::binary`) or fail loudly, never busybox's
/// `ip`, which takes `type bond mode 802.3ad` and makes a balance-rr bond
/// without a word. No link is made, and since busybox's shell would run
/// the applet anyway (it prefers applets to PATH), a shim refuses.
const NEVER_LINKED: &[&str] = &["ip", "ethtool"];

/// What goes into the archive.
pub struct Contents<'a> {
    pub busybox: &'a Path,
    pub modules: &'a ModuleTree,
    pub wanted_modules: &'a [String],
    /// insmod parameters by module name.
    pub module_params: &'a std::collections::BTreeMap<String, String>,
    /// (host file, guest path) of each binary.
    pub binaries: &'a [(PathBuf, String)],
    /// (guest path, mode, bytes) of each file.
    pub files: Vec<(String, u32, Vec<u8>)>,
    /// (MAC as the kernel prints it, guest name) of each NIC, in order.
    pub nics: &'a [(String, String)],
    pub script: &'a str,
}

/// What was built.
pub struct Built {
    /// Bytes written.
    pub bytes: u64,
    /// Modules /init loads, in order.
    pub modules: Vec<String>,
}

/// Builds the archive at `out`.
pub fn build(c: &Contents<'_>, out: &Path) -> Result<Built, Error> {
    let mut a = Archive::default();
    let read = |p: &Path| std::fs::read(p).map_err(|e| Error::io(p, e));
    a.insert("bin/busybox", Entry::File { mode: 0o755, data: read(c.busybox)? });
    a.insert("dev/console", Entry::CharDev { major: 5, minor: 1 });
    for d in ["proc", "sys", "tmp", "run", "root"] {
        a.insert(d, Entry::Dir);
    }
    a.insert(
        "etc/passwd",
        Entry::File { mode: 0o644, data: b"root:x:0:0:root:/root:/bin/sh\n".to_vec() },
    );
    a.insert("etc/group", Entry::File { mode: 0o644, data: b"root:x:0:\n".to_vec() });
    a.insert(
        "etc/hosts",
        Entry::File { mode: 0o644, data: b"127.0.0.1 localhost\n::1 localhost\n".to_vec() },
    );

    let mut lib_dirs = BTreeSet::new();
    let mut taken = BTreeSet::new();
    let mut shims = String::from("# netadm-guest: carried programs over busybox's applets\n");
    for (host, guest) in c.binaries {
        a.insert(guest, file_entry(host)?);
        taken.insert(guest.rsplit('/').next().unwrap_or(guest).to_owned());
        for lib in shared_libraries(host)? {
            if let Some(dir) = Path::new(&lib).parent() {
                lib_dirs.insert(dir.to_string_lossy().into_owned());
            }
            if !a.contains(&lib) {
                a.insert(&lib, file_entry(Path::new(&lib))?);
            }
        }
    }
    let applet_names = applets(c.busybox)?;
    for applet in &applet_names {
        let link = format!("bin/{applet}");
        if NEVER_LINKED.contains(&applet.as_str()) || taken.contains(applet) || a.contains(&link) {
            continue;
        }
        a.insert(&link, Entry::Symlink { target: "busybox".into() });
    }
    for (_, guest) in c.binaries {
        let name = guest.rsplit('/').next().unwrap_or(guest);
        if applet_names.iter().any(|a| a == name) {
            shims.push_str(&format!("{name}() {{ {guest} \"$@\"; }}\n"));
        }
    }
    for name in NEVER_LINKED.iter().filter(|n| !taken.contains(**n)) {
        shims.push_str(&format!(
            "{name}() {{ echo \"{name}: not carried into the guest (GuestConfig::binary)\" >&2; return 127; }}\n"
        ));
    }
    a.insert(SHIMS, Entry::File { mode: 0o644, data: shims.into_bytes() });

    let modules = c.modules.resolve(c.wanted_modules)?;
    for (name, file) in &modules {
        a.insert(
            &format!("{MODULE_DIR}/{name}.ko"),
            Entry::File { mode: 0o644, data: read_module(file)? },
        );
    }
    for (guest, mode, data) in &c.files {
        a.insert(guest, Entry::File { mode: *mode, data: data.clone() });
    }
    a.insert(SCRIPT, Entry::File { mode: 0o755, data: c.script.as_bytes().to_vec() });
    a.insert(LIB, Entry::File { mode: 0o644, data: LIB_SH.as_bytes().to_vec() });
    let names: Vec<String> = modules.iter().map(|(n, _)| n.clone()).collect();
    let lib_path: Vec<String> = lib_dirs.into_iter().collect();
    let load: Vec<(String, String)> = names
        .iter()
        .map(|n| (n.clone(), c.module_params.get(n).cloned().unwrap_or_default()))
        .collect();
    a.insert(
        "init",
        Entry::File {
            mode: 0o755,
            data: init_script(&load, c.nics, &lib_path.join(":")).into_bytes(),
        },
    );

    let mut f = std::io::BufWriter::new(std::fs::File::create(out).map_err(|e| Error::io(out, e))?);
    let bytes = a.write(&mut f).map_err(|e| Error::io(out, e))?;
    std::io::Write::flush(&mut f).map_err(|e| Error::io(out, e))?;
    Ok(Built { bytes, modules: names })
}

/// A host file as an archive entry, its permission bits kept.
fn file_entry(host: &Path) -> Result<Entry, Error> {
    let meta = std::fs::metadata(host).map_err(|e| Error::io(host, e))?;
    let data = std::fs::read(host).map_err(|e| Error::io(host, e))?;
    Ok(Entry::File { mode: meta.permissions().mode() & 0o7777, data })
}

/// The applets this busybox has (`busybox --list`).
fn applets(busybox: &Path) -> Result<Vec<String>, Error> {
    let out = crate::cache::run(&busybox.to_string_lossy(), &["--list"], None)?;
    Ok(out.lines().map(str::to_owned).filter(|a| !a.is_empty() && !a.contains('/')).collect())
}

/// Every shared library `ldd` says `program` loads, and the dynamic loader,
/// as absolute host paths (the guest gets them at the same paths). None for
/// a static program or a script.
pub fn shared_libraries(program: &Path) -> Result<Vec<String>, Error> {
    let out = std::process::Command::new("ldd").arg(program).output().map_err(|e| Error::Tool {
        tool: "ldd".into(),
        why: format!("{e} (apt-get install libc-bin)"),
    })?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if text.contains("not a dynamic executable") || text.contains("statically linked") {
        return Ok(vec![]);
    }
    let bad = |why: String| Error::Binary { program: program.display().to_string(), why };
    if !out.status.success() {
        return Err(bad(format!("ldd: {}", text.trim())));
    }
    let mut libs = vec![];
    for line in text.lines().map(str::trim) {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)",
        // "/lib64/ld-linux-x86-64.so.2 (0x...)", "linux-vdso.so.1 (0x...)".
        let path = match line.split_once(" => ") {
            Some((_, rest)) if rest.starts_with("not found") => {
                return Err(bad(format!(
                    "ldd finds no {}",
                    line.split_whitespace().next().unwrap_or(line)
                )));
            }
            Some((_, rest)) => rest.split(" (").next().unwrap_or(rest),
            None => line.split(" (").next().unwrap_or(line),
        };
        if path.starts_with('/') {
            libs.push(path.to_owned());
        }
    }
    Ok(libs)
}

/// The /init script. Busybox's own applets are called as `/bin/busybox X`
/// where a test's binaries could shadow them, and never for `ip` through a
/// link (see NEVER_LINKED).
fn init_script(modules: &[(String, String)], nics: &[(String, String)], lib_path: &str) -> String {
    let mut s = String::from(
        r#"#!/bin/busybox sh
# netadm-guest /init: mount, load modules, name NICs, run the test's script.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
bb=/bin/busybox
$bb mount -t proc proc /proc
echo "NETADM-GUEST-INIT $($bb cut -d' ' -f1 /proc/uptime)"
fail() { echo "NETADM-GUEST-SETUP-FAILED $*"; $bb poweroff -f; }
$bb mount -t sysfs sysfs /sys || fail mount sysfs
$bb mount -t devtmpfs devtmpfs /dev || fail mount devtmpfs
$bb mkdir -p /dev/pts /dev/shm
$bb mount -t devpts devpts /dev/pts || fail mount devpts
$bb mount -t tmpfs tmpfs /tmp || fail mount /tmp
$bb mount -t tmpfs tmpfs /run || fail mount /run
# Kernel messages below emergencies stay out of the console, where they
# would cut into the script's lines; dmesg has them all.
echo 1 > /proc/sys/kernel/printk
"#,
    );
    if !lib_path.is_empty() {
        s.push_str(&format!("export LD_LIBRARY_PATH={lib_path}\n"));
    }
    for (m, params) in modules {
        let params = if params.is_empty() { String::new() } else { format!(" {params}") };
        s.push_str(&format!("$bb insmod {MODULE_DIR}/{m}.ko{params} || fail insmod {m}{params}\n"));
    }
    s.push_str("$bb ip link set lo up || fail lo up\n");
    // Drivers probe while insmod runs, so the NICs exist now, named in
    // probe order; each is renamed by its MAC (through a temporary name, so
    // two may swap names).
    if !nics.is_empty() {
        s.push_str("for d in /sys/class/net/*; do\n  [ -e $d/address ] || continue\n  case \"$($bb cat $d/address)\" in\n");
        for (i, (mac, _)) in nics.iter().enumerate() {
            s.push_str(&format!("    {mac}) $bb ip link set dev \"${{d##*/}}\" name ngtmp{i} || fail rename {mac} ;;\n"));
        }
        s.push_str("  esac\ndone\n");
        for (i, (mac, name)) in nics.iter().enumerate() {
            s.push_str(&format!(
                "[ -e /sys/class/net/ngtmp{i} ] || fail no NIC with MAC {mac}: $($bb ls /sys/class/net)\n\
                 $bb ip link set dev ngtmp{i} name {name} || fail rename {mac} to {name}\n"
            ));
        }
    }
    s.push_str(&format!(
        r#"echo "NETADM-GUEST-READY $($bb cut -d' ' -f1 /proc/uptime)"
cd /root
/bin/sh -c '. {SHIMS} && . {SCRIPT}' </dev/null 2>&1
echo "NETADM-GUEST-EXIT $?"
$bb poweroff -f
"#
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_of_a_dynamic_program_names_libc_and_the_loader() {
        let libs = shared_libraries(Path::new("/bin/sh")).unwrap();
        assert!(libs.iter().any(|l| l.contains("libc.so")), "{libs:?}");
        assert!(libs.iter().any(|l| l.contains("ld-linux")), "{libs:?}");
        assert!(libs.iter().all(|l| l.starts_with('/')), "{libs:?}");
    }

    #[test]
    fn init_loads_in_order_and_renames_by_mac() {
        let s = init_script(
            &[("failover".into(), String::new()), ("virtio_net".into(), "napi_tx=1".into())],
            &[
                ("52:54:00:00:00:01".into(), "eth1".into()),
                ("52:54:00:00:00:02".into(), "eth0".into()),
            ],
            "/lib/x86_64-linux-gnu",
        );
        let f = s.find("insmod /lib/modules/netadm-guest/failover.ko").unwrap();
        let v = s.find("insmod /lib/modules/netadm-guest/virtio_net.ko napi_tx=1 ||").unwrap();
        assert!(f < v && v < s.find("ngtmp0").unwrap(), "{s}");
        assert!(
            s.contains("52:54:00:00:00:02) $bb ip link set dev \"${d##*/}\" name ngtmp1"),
            "{s}"
        );
        assert!(s.contains("ip link set dev ngtmp1 name eth0"), "{s}");
        assert!(s.find(READY_MARK).unwrap() < s.find(SCRIPT).unwrap(), "{s}");
        assert!(s.find(INIT_MARK).unwrap() < s.find("insmod").unwrap(), "{s}");
        assert!(s.contains(EXIT_MARK) && s.contains(SETUP_FAILED_MARK));
    }
}
