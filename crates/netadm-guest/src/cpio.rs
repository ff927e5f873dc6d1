//! The initramfs as a newc ("070701") cpio archive, uncompressed.
//!
//! Uncompressed because the guest runs under TCG, where the kernel's own
//! gzip unpacking of a few megabytes costs more than QEMU copying them in
//! through fw_cfg. The kernel does not make missing parent directories
//! while it unpacks, so every ancestor of an entry is written first.

use std::collections::BTreeMap;
use std::io::{self, Write};

/// One entry of the archive.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A regular file with its permission bits.
    File { mode: u32, data: Vec<u8> },
    /// A symbolic link to `target`.
    Symlink { target: String },
    /// A character device node (`/dev/console` before devtmpfs is mounted).
    CharDev { major: u32, minor: u32 },
    /// A directory (parents of other entries need none: they are implied).
    Dir,
}

/// An archive being assembled: paths (relative, no leading `/`) to entries.
#[derive(Debug, Default)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
}

impl Archive {
    /// Adds (or replaces) `path`; a leading `/` is ignored.
    pub fn insert(&mut self, path: &str, entry: Entry) {
        self.entries.insert(path.trim_start_matches('/').to_owned(), entry);
    }

    /// Whether `path` is already in the archive.
    pub fn contains(&self, path: &str) -> bool {
        self.entries.contains_key(path.trim_start_matches('/'))
    }

    /// Writes the archive: directories implied by the entries first, then
    /// each entry, then the trailer.
    pub fn write(&self, out: &mut impl Write) -> io::Result<u64> {
        let mut dirs = std::collections::BTreeSet::new();
        for (path, e) in &self.entries {
            if matches!(e, Entry::Dir) {
                dirs.insert(path.as_str());
            }
            let mut at = 0;
            while let Some(i) = path[at..].find('/') {
                dirs.insert(&path[..at + i]);
                at += i + 1;
            }
        }
        let mut w = Writer { out, ino: 1, written: 0 };
        for d in dirs {
            w.entry(d, 0o040_755, 2, 0, &[])?;
        }
        for (path, e) in &self.entries {
            match e {
                Entry::File { mode, data } => w.entry(path, 0o100_000 | mode, 1, 0, data)?,
                Entry::Symlink { target } => {
                    w.entry(path, 0o120_777, 1, 0, target.as_bytes())?;
                }
                Entry::CharDev { major, minor } => {
                    w.entry(path, 0o020_600, 1, (*major << 8) | *minor, &[])?;
                }
                Entry::Dir => {}
            }
        }
        w.entry("TRAILER!!!", 0, 1, 0, &[])?;
        Ok(w.written)
    }
}

struct Writer<'a, W: Write> {
    out: &'a mut W,
    ino: u32,
    written: u64,
}

impl<W: Write> Writer<'_, W> {
    /// One header, name and data, each padded to four bytes. `rdev` is
    /// `major << 8 | minor`.
    fn entry(
        &mut self,
        name: &str,
        mode: u32,
        nlink: u32,
        rdev: u32,
        data: &[u8],
    ) -> io::Result<()> {
        let size = u32::try_from(data.len()).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{name}: over 4 GiB"))
        })?;
        let fields = [
            self.ino,
            mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime: reproducible archives
            size,
            0, // devmajor
            0, // devminor
            rdev >> 8,
            rdev & 0xff,
            name.len() as u32 + 1,
            0, // check
        ];
        self.ino += 1;
        let mut head = String::with_capacity(110 + name.len() + 4);
        head.push_str("070701");
        for f in fields {
            head.push_str(&format!("{f:08X}"));
        }
        head.push_str(name);
        head.push('\0');
        self.put(head.as_bytes())?;
        self.put(data)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        let pad = (4 - (self.written % 4)) % 4;
        self.out.write_all(&[0; 3][..pad as usize])?;
        self.written += pad;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(archive: &[u8], at: usize, i: usize) -> u32 {
        let s = std::str::from_utf8(&archive[at + 6 + 8 * i..at + 14 + 8 * i]).unwrap();
        u32::from_str_radix(s, 16).unwrap()
    }

    /// Walks the archive as the kernel's unpacker does: (name, mode, data).
    fn walk(a: &[u8]) -> Vec<(String, u32, Vec<u8>)> {
        let mut at = 0;
        let mut out = vec![];
        loop {
            assert_eq!(&a[at..at + 6], b"070701", "magic at {at}");
            let (mode, size, namesize) =
                (field(a, at, 1), field(a, at, 6) as usize, field(a, at, 11) as usize);
            let name =
                std::str::from_utf8(&a[at + 110..at + 110 + namesize - 1]).unwrap().to_owned();
            let data_at = (at + 110 + namesize).next_multiple_of(4);
            let data = a[data_at..data_at + size].to_vec();
            at = (data_at + size).next_multiple_of(4);
            if name == "TRAILER!!!" {
                assert_eq!(at, a.len());
                return out;
            }
            out.push((name, mode, data));
        }
    }

    #[test]
    fn parents_come_first_and_every_field_is_where_the_kernel_reads_it() {
        let mut a = Archive::default();
        a.insert("/usr/sbin/ip", Entry::File { mode: 0o755, data: b"ELF!x".to_vec() });
        a.insert("bin/sh", Entry::Symlink { target: "busybox".into() });
        a.insert("dev/console", Entry::CharDev { major: 5, minor: 1 });
        a.insert("proc", Entry::Dir);
        let mut buf = vec![];
        let n = a.write(&mut buf).unwrap();
        assert_eq!(n as usize, buf.len());
        assert_eq!(buf.len() % 4, 0);
        let names: Vec<_> = walk(&buf).into_iter().map(|(n, m, d)| (n, m, d.len())).collect();
        assert_eq!(
            names,
            [
                ("bin".into(), 0o040_755, 0),
                ("dev".into(), 0o040_755, 0),
                ("proc".into(), 0o040_755, 0),
                ("usr".into(), 0o040_755, 0),
                ("usr/sbin".into(), 0o040_755, 0),
                ("bin/sh".into(), 0o120_777, 7),
                ("dev/console".into(), 0o020_600, 0),
                ("usr/sbin/ip".into(), 0o100_755, 5),
            ]
        );
        let entries = walk(&buf);
        assert_eq!(entries[7].2, b"ELF!x");
        // rdevmajor/rdevminor of dev/console.
        let at = buf.windows(11).position(|w| w == b"dev/console").unwrap() - 110;
        assert_eq!((field(&buf, at, 9), field(&buf, at, 10)), (5, 1));
    }
}
