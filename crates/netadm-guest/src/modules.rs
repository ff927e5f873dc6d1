//! Kernel modules the guest loads, with their dependencies in load order.
//!
//! Debian's kernel package ships no modules.dep (its postinst runs depmod
//! on the installed tree, which we never do), so the dependencies are read
//! where depmod reads them: the `depends=` string of each module's
//! `.modinfo` ELF section. Modules built into the kernel are listed in
//! `modules.builtin` and need no file.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use crate::Error;

/// The modules of one unpacked kernel: module name (with `_`, as the
/// kernel spells it) to its file.
pub struct ModuleTree {
    files: BTreeMap<String, PathBuf>,
    builtin: HashSet<String>,
}

/// The module name a file stands for: `8021q.ko` → `8021q`,
/// `nf-nat.ko.xz` → `nf_nat`.
fn module_name(file: &str) -> Option<String> {
    let stem = [".ko", ".ko.xz", ".ko.zst", ".ko.gz"].iter().find_map(|s| file.strip_suffix(s))?;
    Some(stem.replace('-', "_"))
}

impl ModuleTree {
    /// Reads `dir` (`lib/modules/RELEASE` of the unpacked package).
    pub fn read(dir: &Path) -> Result<Self, Error> {
        let mut files = BTreeMap::new();
        let mut stack = vec![dir.join("kernel")];
        while let Some(d) = stack.pop() {
            let rd = std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))?;
            for e in rd {
                let e = e.map_err(|e| Error::io(&d, e))?;
                let path = e.path();
                if e.file_type().map_err(|e| Error::io(&path, e))?.is_dir() {
                    stack.push(path);
                } else if let Some(name) = e.file_name().to_str().and_then(module_name) {
                    files.insert(name, path);
                }
            }
        }
        let builtin_list = dir.join("modules.builtin");
        let builtin = std::fs::read_to_string(&builtin_list)
            .map_err(|e| Error::io(&builtin_list, e))?
            .lines()
            .filter_map(|l| l.rsplit('/').next().and_then(module_name))
            .collect();
        Ok(Self { files, builtin })
    }

    /// `wanted` and everything they depend on, each once, every module
    /// after its dependencies (the order insmod needs). Built-in modules
    /// are left out; an unknown name is an error naming it.
    pub fn resolve(&self, wanted: &[String]) -> Result<Vec<(String, PathBuf)>, Error> {
        let mut order = vec![];
        let mut done = HashSet::new();
        for w in wanted {
            self.visit(&w.replace('-', "_"), &mut done, &mut vec![], &mut order)?;
        }
        Ok(order)
    }

    fn visit(
        &self,
        name: &str,
        done: &mut HashSet<String>,
        path: &mut Vec<String>,
        order: &mut Vec<(String, PathBuf)>,
    ) -> Result<(), Error> {
        if done.contains(name) || (self.builtin.contains(name) && !self.files.contains_key(name)) {
            return Ok(());
        }
        if path.iter().any(|p| p == name) {
            return Err(Error::Module {
                name: name.into(),
                why: format!("depends on itself via {path:?}"),
            });
        }
        let Some(file) = self.files.get(name) else {
            return Err(Error::Module {
                name: name.into(),
                why: "is neither a module file of this kernel nor built in".into(),
            });
        };
        path.push(name.into());
        for dep in
            depends(&read_module(file)?).map_err(|why| Error::Module { name: name.into(), why })?
        {
            self.visit(&dep, done, path, order)?;
        }
        path.pop();
        done.insert(name.into());
        order.push((name.into(), file.clone()));
        Ok(())
    }
}

/// How Debian compresses module files: the file's ending and the tool
/// that decompresses it (`TOOL -dc FILE`).
const COMPRESSIONS: [(&str, &str); 3] = [(".xz", "xz"), (".zst", "zstd"), (".gz", "gzip")];

/// A module file's bytes, decompressed on the host when Debian compressed
/// it (bookworm's 6.1 ships plain `.ko`; newer kernels `.ko.xz`), so the
/// guest's insmod never has to.
pub fn read_module(file: &Path) -> Result<Vec<u8>, Error> {
    let name = file.to_string_lossy();
    let Some(&(_, tool)) = COMPRESSIONS.iter().find(|(end, _)| name.ends_with(end)) else {
        return std::fs::read(file).map_err(|e| Error::io(file, e));
    };
    let out = std::process::Command::new(tool)
        .arg("-dc")
        .arg(file)
        .output()
        .map_err(|e| Error::Tool { tool: tool.into(), why: e.to_string() })?;
    if !out.status.success() {
        return Err(Error::Tool {
            tool: tool.into(),
            why: format!("-dc {name}: {}", String::from_utf8_lossy(&out.stderr).trim()),
        });
    }
    Ok(out.stdout)
}

/// The `depends=` list of a module's `.modinfo` section.
pub fn depends(elf: &[u8]) -> Result<Vec<String>, String> {
    let modinfo = section(elf, ".modinfo")?;
    Ok(modinfo
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"depends="))
        .map(|v| {
            String::from_utf8_lossy(v)
                .split(',')
                .filter(|d| !d.is_empty())
                .map(|d| d.replace('-', "_"))
                .collect()
        })
        .unwrap_or_default())
}

/// The contents of the section called `want` of a little-endian ELF64 file.
fn section<'a>(elf: &'a [u8], want: &str) -> Result<&'a [u8], String> {
    let u16_at = |at: usize| elf.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at =
        |at: usize| elf.get(at..at + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
    let u64_at =
        |at: usize| elf.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize);
    if elf.get(..6) != Some(b"\x7fELF\x02\x01") {
        return Err("is not a little-endian ELF64 file".into());
    }
    let short = || "is cut short (ELF section headers)".to_string();
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(0x28).ok_or_else(short)?,
        u16_at(0x3a).ok_or_else(short)?,
        u16_at(0x3c).ok_or_else(short)?,
        u16_at(0x3e).ok_or_else(short)?,
    );
    let header = |i: usize| -> Option<(usize, &'a [u8])> {
        let h = shoff + i * shentsize;
        let (name, off, size) = (u32_at(h)?, u64_at(h + 0x18)?, u64_at(h + 0x20)?);
        Some((name, elf.get(off..off.checked_add(size)?)?))
    };
    let (_, names) = header(shstrndx).ok_or_else(short)?;
    for i in 0..shnum {
        let (name, data) = header(i).ok_or_else(short)?;
        let n = names.get(name..).unwrap_or_default();
        if n.split(|b| *b == 0).next() == Some(want.as_bytes()) {
            return Ok(data);
        }
    }
    Err(format!("has no {want} section"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_spelled_as_the_kernel_spells_them() {
        assert_eq!(module_name("8021q.ko").as_deref(), Some("8021q"));
        assert_eq!(module_name("nf-nat.ko.xz").as_deref(), Some("nf_nat"));
        assert_eq!(module_name("virtio_net.ko.zst").as_deref(), Some("virtio_net"));
        assert_eq!(module_name("modules.order"), None);
    }

    /// A minimal ELF64 with a `.modinfo` section, as a module has.
    fn elf_with_modinfo(modinfo: &[u8]) -> Vec<u8> {
        let shstr = b"\0.modinfo\0.shstrtab\0";
        let mut f = vec![0u8; 64];
        f[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let modinfo_at = f.len();
        f.extend_from_slice(modinfo);
        let shstr_at = f.len();
        f.extend_from_slice(shstr);
        let shoff = f.len();
        let mut sh = |name: u32, off: usize, size: usize| {
            let mut h = [0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&(off as u64).to_le_bytes());
            h[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
            f.extend_from_slice(&h);
        };
        sh(0, 0, 0);
        sh(1, modinfo_at, modinfo.len());
        sh(10, shstr_at, shstr.len());
        f[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        f[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        f[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        f[0x3e..0x40].copy_from_slice(&2u16.to_le_bytes());
        f
    }

    #[test]
    fn depends_are_read_from_modinfo() {
        let elf = elf_with_modinfo(b"license=GPL\0depends=garp,mrp,stp-x\0vermagic=6.1\0");
        assert_eq!(depends(&elf).unwrap(), ["garp", "mrp", "stp_x"]);
        let none = elf_with_modinfo(b"license=GPL\0depends=\0");
        assert!(depends(&none).unwrap().is_empty());
        assert!(depends(b"#!/bin/sh").unwrap_err().contains("not a little-endian ELF64"));
        assert!(depends(&elf[..100]).unwrap_err().contains("cut short"));
    }

    #[test]
    fn compressed_modules_are_read_decompressed_and_plain_ones_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("m.ko");
        std::fs::write(&plain, b"module bytes").unwrap();
        assert_eq!(read_module(&plain).unwrap(), b"module bytes");
        let gz = dir.path().join("m.ko.gz");
        let out = std::process::Command::new("gzip").arg("-c").arg(&plain).output().unwrap();
        std::fs::write(&gz, out.stdout).unwrap();
        assert_eq!(read_module(&gz).unwrap(), b"module bytes");
    }

    #[test]
    fn dependencies_load_first_and_each_once() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("kernel/net");
        std::fs::create_dir_all(&k).unwrap();
        let module = |name: &str, deps: &str| {
            std::fs::write(
                k.join(format!("{name}.ko")),
                elf_with_modinfo(format!("depends={deps}\0").as_bytes()),
            )
            .unwrap();
        };
        module("8021q", "garp,mrp");
        module("garp", "stp,llc");
        module("mrp", "");
        module("stp", "llc");
        module("llc", "");
        module("loop_a", "loop_b");
        module("loop_b", "loop_a");
        std::fs::write(dir.path().join("modules.builtin"), "kernel/net/core/failover.ko\n")
            .unwrap();
        let tree = ModuleTree::read(dir.path()).unwrap();
        let names = |w: &[&str]| -> Vec<String> {
            let w: Vec<String> = w.iter().map(|s| s.to_string()).collect();
            tree.resolve(&w).unwrap().into_iter().map(|(n, _)| n).collect()
        };
        assert_eq!(names(&["8021q", "mrp", "failover"]), ["llc", "stp", "garp", "mrp", "8021q"]);
        let err = tree.resolve(&["bonding".into()]).unwrap_err().to_string();
        assert!(err.contains("bonding") && err.contains("neither"), "{err}");
        let err = tree.resolve(&["loop_a".into()]).unwrap_err().to_string();
        assert!(err.contains("depends on itself"), "{err}");
    }
}
