//! Debian packages fetched with apt and unpacked with `dpkg -x` into a
//! cache, one directory per package version; nothing is installed on the
//! host.
//!
//! The cache is `$NETADM_TEST_CACHE/guest` (default
//! `/var/cache/netadm-test/guest`, beside the bookworm root of
//! tests/scripts/bookworm-root.sh). A directory is complete once its
//! `.complete` stamp is written, last; one process at a time fills the
//! cache (flock on `guest/.lock`), the others wait and reuse it. When apt
//! offers a newer version, it is fetched and the older ones of the same
//! kind are removed.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// The metapackage whose dependency is the kernel: the full Debian kernel,
/// because the cloud kernel (linux-image-cloud-amd64) has no e1000e or 9p.
pub const KERNEL_METAPACKAGE: &str = "linux-image-amd64";
/// busybox, statically linked: the guest's shell and tools.
pub const BUSYBOX_PACKAGE: &str = "busybox-static";

/// The cache's directory: `$NETADM_TEST_CACHE/guest`, default
/// `/var/cache/netadm-test/guest`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("NETADM_TEST_CACHE")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/var/cache/netadm-test"), PathBuf::from)
        .join("guest")
}

/// A kernel unpacked from its Debian package.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The versioned package, e.g. `linux-image-6.1.0-48-amd64`.
    pub package: String,
    /// Its Debian version, e.g. `6.1.172-1`.
    pub version: String,
    /// `uname -r` in the guest, e.g. `6.1.0-48-amd64`.
    pub release: String,
    /// What QEMU boots: the uncompressed ELF (`vmlinux`, booted through its
    /// PVH entry) when the kernel has one, else the package's bzImage.
    pub image: PathBuf,
    /// `lib/modules/RELEASE` of the unpacked package.
    pub modules: PathBuf,
}

/// The kernel apt offers now, unpacked (fetched first if the cache lacks
/// this version).
pub fn kernel() -> Result<Kernel, Error> {
    let r = resolved()?;
    let (package, version) = (r.kernel, r.kernel_version);
    let dir = unpacked("kernel", &package, &version, |root| {
        let (release, _) = boot_files(root)?;
        let vmlinuz = root.join(format!("boot/vmlinuz-{release}"));
        if pvh(root, &release)? {
            extract_vmlinux(&vmlinuz, &root.join("vmlinux"))?;
        }
        Ok(())
    })?;
    let (release, _) = boot_files(&dir)?;
    let vmlinux = dir.join("vmlinux");
    let image =
        if vmlinux.exists() { vmlinux } else { dir.join(format!("boot/vmlinuz-{release}")) };
    Ok(Kernel { modules: dir.join("lib/modules").join(&release), package, version, release, image })
}

/// The static busybox apt offers now, unpacked: its binary's path.
pub fn busybox() -> Result<PathBuf, Error> {
    let version = resolved()?.busybox_version;
    let dir = unpacked("busybox", BUSYBOX_PACKAGE, &version, |root| {
        let bin = root.join("bin/busybox");
        if bin.is_file() {
            Ok(())
        } else {
            Err(Error::Apt { package: BUSYBOX_PACKAGE.into(), why: "has no bin/busybox".into() })
        }
    })?;
    Ok(dir.join("bin/busybox"))
}

/// The release of an unpacked kernel package and its boot/ directory.
fn boot_files(root: &Path) -> Result<(String, PathBuf), Error> {
    let boot = root.join("boot");
    let rd = std::fs::read_dir(&boot).map_err(|e| Error::io(&boot, e))?;
    for e in rd.flatten() {
        if let Some(release) = e.file_name().to_str().and_then(|n| n.strip_prefix("vmlinuz-")) {
            return Ok((release.to_owned(), boot));
        }
    }
    Err(Error::Kernel(format!("{}: no vmlinuz-*", boot.display())))
}

/// Whether the kernel can be entered through PVH (CONFIG_PVH=y): QEMU then
/// loads its uncompressed ELF directly, skipping the in-guest
/// decompression that costs Debian's xz-packed kernel about 6 s under TCG.
fn pvh(root: &Path, release: &str) -> Result<bool, Error> {
    let config = root.join(format!("boot/config-{release}"));
    let text = std::fs::read_to_string(&config).map_err(|e| Error::io(&config, e))?;
    Ok(text.lines().any(|l| l == "CONFIG_PVH=y"))
}

/// Decompresses the kernel inside a bzImage to `out`, on the host. The
/// setup header says where the payload is; the payload's last four bytes
/// are the uncompressed size (the kernel build's size_append), which the
/// result must match.
fn extract_vmlinux(bzimage: &Path, out: &Path) -> Result<(), Error> {
    let img = std::fs::read(bzimage).map_err(|e| Error::io(bzimage, e))?;
    let bad = |why: &str| Error::Kernel(format!("{}: {why}", bzimage.display()));
    let u32_at =
        |at: usize| img.get(at..at + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
    if img.get(0x202..0x206) != Some(b"HdrS") {
        return Err(bad("no bzImage setup header"));
    }
    let setup_sects = match img[0x1f1] {
        0 => 4,
        n => n as usize,
    };
    let start = (setup_sects + 1) * 512;
    let (off, len) = (
        u32_at(0x248).ok_or_else(|| bad("short header"))?,
        u32_at(0x24c).ok_or_else(|| bad("short header"))?,
    );
    let payload =
        img.get(start + off..start + off + len).ok_or_else(|| bad("payload beyond the file"))?;
    let size = u32::from_le_bytes(payload[len - 4..].try_into().unwrap()) as usize;
    let (tool, args): (&str, &[&str]) = match payload {
        [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => ("xz", &["-dc", "--single-stream"]),
        [0x1f, 0x8b, ..] => ("gzip", &["-dc"]),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => ("zstd", &["-dc"]),
        [0x02, 0x21, 0x4c, 0x18, ..] => ("lz4", &["-dc"]),
        _ => return Err(bad("payload compressed in a format this harness does not decompress")),
    };
    let mut child = Command::new(tool)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| Error::Tool {
            tool: tool.into(),
            why: format!("{e} (apt-get install xz-utils)"),
        })?;
    let mut stdin = child.stdin.take().unwrap();
    let data = payload.to_vec();
    // Fed from a thread: the tool's output fills its pipe before it has
    // read all of its input.
    let feeder = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &data));
    let output = child
        .wait_with_output()
        .map_err(|e| Error::Tool { tool: tool.into(), why: e.to_string() })?;
    let _ = feeder.join();
    let elf = output.stdout;
    if elf.len() != size || !elf.starts_with(b"\x7fELF") {
        return Err(Error::Tool {
            tool: tool.into(),
            why: format!(
                "decompressing {}: {} bytes, not the {size}-byte ELF the header promises ({})",
                bzimage.display(),
                elf.len(),
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    std::fs::write(out, elf).map_err(|e| Error::io(out, e))
}

/// A command's stdout, or an error naming it and its stderr.
pub(crate) fn run(tool: &str, args: &[&str], cwd: Option<&Path>) -> Result<String, Error> {
    let mut c = Command::new(tool);
    c.args(args);
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    let out = c.output().map_err(|e| Error::Tool { tool: tool.into(), why: e.to_string() })?;
    if !out.status.success() {
        return Err(Error::Tool {
            tool: tool.into(),
            why: format!(
                "{} ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What apt offers now: the versioned kernel package the metapackage
/// depends on, and the versions of it and of busybox.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Resolved {
    kernel: String,
    kernel_version: String,
    busybox_version: String,
}

/// What apt offers, from `apt-cache` (its local lists: no network), kept
/// in the cache beside a stamp of apt's lists (name, size, mtime of each
/// file) and asked again only when `apt-get update` changed them: without
/// a pkgcache.bin (docker-style apt configuration, as here) each
/// apt-cache call parses every list, 1.5 s.
fn resolved() -> Result<Resolved, Error> {
    let lists = Path::new("/var/lib/apt/lists");
    let mut stamp = String::new();
    let rd = std::fs::read_dir(lists).map_err(|e| Error::io(lists, e))?;
    let mut files: Vec<_> = rd.flatten().collect();
    files.sort_by_key(|e| e.file_name());
    for e in files {
        if let Ok(m) = e.metadata()
            && m.is_file()
        {
            let mtime =
                m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            stamp.push_str(&format!(
                "{} {} {}\n",
                e.file_name().to_string_lossy(),
                m.len(),
                mtime.map_or(0, |d| d.as_nanos())
            ));
        }
    }
    let cache = cache_dir();
    let file = cache.join("apt-resolved");
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    if let Some(rest) = text.strip_prefix(&stamp) {
        let v: Vec<&str> = rest.lines().collect();
        if let [k, kv, bv] = v[..] {
            return Ok(Resolved {
                kernel: k.into(),
                kernel_version: kv.into(),
                busybox_version: bv.into(),
            });
        }
    }
    let kernel = dependency_of(KERNEL_METAPACKAGE)?;
    let policy = run("apt-cache", &["policy", &kernel, BUSYBOX_PACKAGE], None)?;
    let r = Resolved {
        kernel_version: candidate(&policy, &kernel)?,
        busybox_version: candidate(&policy, BUSYBOX_PACKAGE)?,
        kernel,
    };
    std::fs::create_dir_all(&cache).map_err(|e| Error::io(&cache, e))?;
    let tmp = cache.join(format!(".apt-resolved.{}", std::process::id()));
    let body = format!("{stamp}{}\n{}\n{}\n", r.kernel, r.kernel_version, r.busybox_version);
    std::fs::write(&tmp, body).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, &file).map_err(|e| Error::io(&file, e))?;
    Ok(r)
}

/// The candidate version of `package` in `apt-cache policy` output (one
/// block per package: `PACKAGE:` then indented lines).
fn candidate(policy: &str, package: &str) -> Result<String, Error> {
    let mut mine = false;
    for l in policy.lines() {
        if !l.starts_with(' ') {
            mine = l.strip_suffix(':') == Some(package);
        } else if mine
            && let Some(v) = l.trim().strip_prefix("Candidate: ")
            && v != "(none)"
        {
            return Ok(v.to_owned());
        }
    }
    Err(Error::Apt {
        package: package.into(),
        why: "has no candidate version (run apt-get update)".into(),
    })
}

/// The versioned kernel package a metapackage depends on
/// (`linux-image-amd64` → `linux-image-6.1.0-48-amd64`).
fn dependency_of(meta: &str) -> Result<String, Error> {
    let text = run("apt-cache", &["depends", meta], None)?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Depends: "))
        .filter(|d| d.starts_with("linux-image-"))
        .map(str::to_owned)
        .ok_or_else(|| Error::Apt {
            package: meta.into(),
            why: "depends on no linux-image-* package (run apt-get update)".into(),
        })
}

/// An exclusive flock on `path`, released when the file is dropped.
pub(crate) fn lock(path: &Path) -> Result<std::fs::File, Error> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    // SAFETY: flock on a descriptor this function owns; it blocks until
    // the lock is ours.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(Error::io(path, std::io::Error::last_os_error()));
    }
    Ok(f)
}

/// `package` at `version` unpacked under the cache as `KIND-PACKAGE_VERSION`,
/// `prepare` run on the fresh tree before it is stamped complete.
fn unpacked(
    kind: &str,
    package: &str,
    version: &str,
    prepare: impl FnOnce(&Path) -> Result<(), Error>,
) -> Result<PathBuf, Error> {
    let cache = cache_dir();
    std::fs::create_dir_all(&cache).map_err(|e| Error::io(&cache, e))?;
    let _lock = lock(&cache.join(".lock"))?;
    let safe: String = version
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || ".+-~".contains(c) { c } else { '_' })
        .collect();
    let name = format!("{kind}-{package}_{safe}");
    let dir = cache.join(&name);
    let stamp = format!("{package}={version}\n");
    if std::fs::read_to_string(dir.join(".complete")).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(dir);
    }
    let tmp = cache.join(format!(".{name}.tmp"));
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let fetch = || -> Result<(), Error> {
        let spec = format!("{package}={version}");
        run("apt-get", &["download", "-q", "-o", "APT::Sandbox::User=root", &spec], Some(&tmp))?;
        let deb = std::fs::read_dir(&tmp)
            .map_err(|e| Error::io(&tmp, e))?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .ok_or_else(|| Error::Apt {
                package: package.into(),
                why: "apt-get download left no .deb".into(),
            })?;
        let root = tmp.join("root");
        run("dpkg", &["-x", &deb.to_string_lossy(), &root.to_string_lossy()], None)?;
        std::fs::remove_file(&deb).map_err(|e| Error::io(&deb, e))?;
        prepare(&root)?;
        std::fs::write(root.join(".complete"), &stamp).map_err(|e| Error::io(&root, e))?;
        std::fs::rename(&root, &dir).map_err(|e| Error::io(&dir, e))
    };
    let made = fetch();
    let _ = std::fs::remove_dir_all(&tmp);
    made?;
    // Older versions of this kind are no longer what apt offers.
    for e in std::fs::read_dir(&cache).map_err(|e| Error::io(&cache, e))?.flatten() {
        let n = e.file_name();
        let n = n.to_string_lossy();
        if n.starts_with(&format!("{kind}-")) && n != name {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_candidate_is_read_from_its_own_block() {
        let policy = "linux-image-6.1.0-57-amd64:\n  Installed: (none)\n  Candidate: 6.1.192-3\n  \
                      Version table:\n     6.1.192-3 500\nbusybox-static:\n  Installed: (none)\n  \
                      Candidate: 1:1.35.0-4+b1\nnothing:\n  Installed: (none)\n  Candidate: (none)\n";
        assert_eq!(super::candidate(policy, "busybox-static").unwrap(), "1:1.35.0-4+b1");
        assert_eq!(super::candidate(policy, "linux-image-6.1.0-57-amd64").unwrap(), "6.1.192-3");
        let e = super::candidate(policy, "nothing").unwrap_err().to_string();
        assert!(e.contains("package nothing has no candidate version (run apt-get update)"), "{e}");
        assert!(super::candidate(policy, "absent").is_err());
    }
}
