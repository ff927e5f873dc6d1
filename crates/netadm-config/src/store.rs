//! Reading and atomically replacing `links.toml` in the state directory, and
//! the journal of changes appended between two replacements.
//!
//! Rewriting the whole file costs what the whole configuration costs (at
//! 10,000 VNICs, 0.8 MB serialised and fsync'd per verb), so a change is
//! appended to `links.journal` instead: one line per change, the array of
//! the entries it changed (each entry's new value, or its removal), under
//! one checksum, fsync'd before the verb answers, and replayed whole or not
//! at all. (A line holding one entry alone, as earlier versions wrote one
//! per entry, still replays.) The
//! journal's first line names, by hash, the exact `links.toml` it continues;
//! loading replays it only onto that file. When the journal has grown as
//! large as `links.toml` (and whenever netadmd starts or stops) the state is
//! compacted: written whole, atomically, as before, and the journal removed.
//! A journal left behind by a crash between those two steps names the old
//! file, so it is ignored, never applied twice.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use netadm_model::{AddrObj, FlowName, LinkName};
use serde::{Deserialize, Serialize};

use crate::links::{
    AddrConf, AggrConf, EtherstubConf, FlowConf, IfConf, LinkState, LinkStateError, PhysConf,
    Section, VnicConf, check_mac_mode,
};
use crate::location::{Location, Snippet, decode};

/// The file name of the persistent link configuration in the state directory.
pub const LINKS_FILE: &str = "links.toml";

/// The file name of the journal of changes since `links.toml` was written.
pub const JOURNAL_FILE: &str = "links.journal";

/// The file beside `links.toml` that holds an armed commit-confirmed
/// checkpoint (`netadm apply --confirm-timeout`): the configuration to go
/// back to and when.
pub const CHECKPOINT_FILE: &str = "links.checkpoint.toml";

/// A configuration as `links.toml` holds it (without the header comment).
pub fn to_toml(state: &LinkState) -> Result<String, String> {
    toml::to_string(state).map_err(|e| e.to_string())
}

/// A configuration in the `links.toml` schema as JSON.
pub fn to_json(state: &LinkState) -> Result<String, String> {
    serde_json::to_string_pretty(state).map(|s| s + "\n").map_err(|e| e.to_string())
}

/// What [`CHECKPOINT_FILE`] holds.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointFile {
    /// When to roll back, in ms since the Unix epoch.
    deadline_ms: u64,
    /// The configuration to roll back to.
    state: LinkState,
}

/// The journal's first line, before the hash of the `links.toml` it
/// continues.
const JOURNAL_HEADER: &str = "# netadm links.toml journal; continues links.toml ";

/// Below this size `links.toml` is simply rewritten on every change (a
/// millisecond or so, and the file an operator reads is always current);
/// from it on, changes go to the journal. 64 KiB is about 800 VNICs.
pub const JOURNAL_FROM: u64 = 64 * 1024;

/// Temporary files are `.links.toml.tmp.<random>` (tempfile); anything
/// starting with this prefix is left over from an interrupted save.
const TEMP_PREFIX: &str = ".links.toml.tmp";

const HEADER: &str = "# netadm persistent link configuration; written by netadmd\n\n";

/// Why the persistent link configuration could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file-system operation failed.
    #[error("{}: {action}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// What was being done, e.g. "read", "rename over".
        action: &'static str,
        /// The I/O error.
        source: io::Error,
    },
    /// `links.toml` is not valid: a TOML syntax error, an unknown field, a
    /// bad name or value, or an unsupported version. The file is untouched.
    #[error(
        "{}:{line}:{column}: {message}{}",
        path.display(),
        Snippet { line: *line, column: *column, source_line }
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// What is wrong.
        message: String,
        /// The text of the offending line.
        source_line: String,
    },
    /// The state to save is invalid; nothing was written.
    #[error("{}: refusing to save: {error}", path.display())]
    Invalid {
        /// The file that was not written.
        path: PathBuf,
        /// What is invalid.
        error: LinkStateError,
    },
    /// The state could not be serialized as TOML; nothing was written.
    #[error("{}: cannot serialize: {message}", path.display())]
    Serialize {
        /// The file that was not written.
        path: PathBuf,
        /// The serializer's message.
        message: String,
    },
}

/// The persistent link configuration store: `links.toml` in a state
/// directory, replaced atomically on every save (write a temporary file,
/// fsync it, rename it over `links.toml`, fsync the directory), so a crash
/// leaves either the old or the new file, never a mix.
///
/// Between two such replacements, [`Store::append`] records changes in the
/// journal (see the module documentation); [`Store::load`] replays it.
///
/// One process owns a state directory at a time; `Store` does not lock.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    path: PathBuf,
    journal_path: PathBuf,
    journal: Arc<Mutex<Journal>>,
    /// [`JOURNAL_FROM`], unless changed.
    journal_from: u64,
}

/// A configuration written whole and fsync'd to a temporary file beside
/// `links.toml`, not yet renamed over it ([`Store::stage`]); dropped, the
/// file is removed.
#[derive(Debug)]
pub struct Staged {
    file: tempfile::TempPath,
    /// The hash of its bytes, and their length: the base a journal after
    /// it continues.
    base: u64,
    len: u64,
}

impl Staged {
    /// Where it was written.
    pub fn path(&self) -> &Path {
        &self.file
    }
}

/// The journal as this process has it.
#[derive(Debug, Default)]
struct Journal {
    /// Hash of the `links.toml` bytes last loaded or saved.
    base: u64,
    /// Their length.
    base_len: u64,
    /// The journal, once this process has created it.
    file: Option<File>,
    /// Its length.
    len: u64,
}

/// One change to the persistent configuration: an entry of a section set to
/// a value, or removed (`None`). Replaying a sequence of them onto a state
/// that already holds it changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Entry {
    /// `[phys.DEVICE]`.
    Phys(LinkName, Option<PhysConf>),
    /// `[aggr.NAME]`.
    Aggr(LinkName, Option<AggrConf>),
    /// `[vnic.NAME]`.
    Vnic(LinkName, Option<VnicConf>),
    /// `[etherstub.NAME]`.
    Etherstub(LinkName, Option<EtherstubConf>),
    /// `[interface.LINK]`.
    Interface(LinkName, Option<IfConf>),
    /// `[address."LINK/TAG"]`.
    Address(AddrObj, Option<AddrConf>),
    /// `[proto] "PROTO.PROP"`.
    Proto(String, Option<String>),
    /// `[flow.NAME]`.
    Flow(FlowName, Option<FlowConf>),
}

impl Entry {
    /// Applies the change to `st`.
    pub fn apply(self, st: &mut LinkState) {
        fn put<K: Ord + Clone, V: Clone>(m: &mut Section<K, V>, k: K, v: Option<V>) {
            match v {
                Some(v) => m.insert(k, v),
                None => m.remove(&k),
            };
        }
        match self {
            Entry::Phys(k, v) => put(&mut st.phys, k, v),
            Entry::Aggr(k, v) => put(&mut st.aggr, k, v),
            Entry::Vnic(k, v) => put(&mut st.vnic, k, v),
            Entry::Etherstub(k, v) => put(&mut st.etherstub, k, v),
            Entry::Interface(k, v) => put(&mut st.interface, k, v),
            Entry::Address(k, v) => put(&mut st.address, k, v),
            Entry::Proto(k, v) => put(&mut st.proto, k, v),
            Entry::Flow(k, v) => put(&mut st.flow, k, v),
        }
    }

    /// What [`LinkState::validate`] checks, for this entry alone.
    fn validate(&self) -> Result<(), LinkStateError> {
        match self {
            Entry::Vnic(vnic, Some(c)) => check_mac_mode(&c.mac_mode)
                .map_err(|error| LinkStateError::MacMode { vnic: vnic.clone(), error }),
            Entry::Address(addrobj, Some(c)) => c
                .check()
                .map(drop)
                .map_err(|error| LinkStateError::Address { addrobj: addrobj.clone(), error }),
            _ => Ok(()),
        }
    }
}

/// The changes that turn `old` into `new`, section by section. Nodes the
/// two configurations share (all but the paths to what a verb changed,
/// when one was built from the other) are skipped, not compared: this
/// costs what changed, not what is there.
pub fn diff(old: &LinkState, new: &LinkState) -> Vec<Entry> {
    fn section<K: Ord + Clone, V: PartialEq + Clone>(
        a: &Section<K, V>,
        b: &Section<K, V>,
        mk: fn(K, Option<V>) -> Entry,
        out: &mut Vec<Entry>,
    ) {
        out.extend(a.diff(b).map(|(k, _, v)| mk(k.clone(), v.cloned())));
    }
    let mut out = vec![];
    section(&old.phys, &new.phys, Entry::Phys, &mut out);
    section(&old.aggr, &new.aggr, Entry::Aggr, &mut out);
    section(&old.vnic, &new.vnic, Entry::Vnic, &mut out);
    section(&old.etherstub, &new.etherstub, Entry::Etherstub, &mut out);
    section(&old.interface, &new.interface, Entry::Interface, &mut out);
    section(&old.proto, &new.proto, Entry::Proto, &mut out);
    section(&old.address, &new.address, Entry::Address, &mut out);
    section(&old.flow, &new.flow, Entry::Flow, &mut out);
    out
}

/// FNV-1a, 64 bits: names a `links.toml` in the journal, and checks each
/// record (a torn last line fails it).
fn fnv(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// The journal's first line: it continues the `links.toml` of hash `base`.
fn journal_header(base: u64) -> String {
    format!("{JOURNAL_HEADER}{base:016x}\n")
}

fn io_err(path: &Path, action: &'static str) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_owned();
    move |source| StoreError::Io { path, action, source }
}

impl Store {
    /// Opens the store in `dir`, creating the directory (mode 0700) if it is
    /// missing, and removes temporary files left by an interrupted save.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err(dir, "create directory"))?;
        for entry in fs::read_dir(dir).map_err(io_err(dir, "list directory"))? {
            let entry = entry.map_err(io_err(dir, "list directory"))?;
            if entry.file_name().as_encoded_bytes().starts_with(TEMP_PREFIX.as_bytes()) {
                let stale = entry.path();
                match fs::remove_file(&stale) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_err(&stale, "remove stale temporary file")(e)),
                }
            }
        }
        let path = dir.join(LINKS_FILE);
        // What a journal started before any load continues.
        let bytes = fs::read(&path).unwrap_or_default();
        let journal =
            Journal { base: fnv(&bytes), base_len: bytes.len() as u64, ..Default::default() };
        Ok(Store {
            dir: dir.to_owned(),
            path,
            journal_path: dir.join(JOURNAL_FILE),
            journal: Arc::new(Mutex::new(journal)),
            journal_from: JOURNAL_FROM,
        })
    }

    /// The journal's state. After a panic while it was held (a bug, which
    /// the caller caught), what it says of the files may be stale: it is
    /// read again from the disk and the open journal let go, so the next
    /// change writes `links.toml` whole rather than append to a journal
    /// that may not continue it.
    fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|poisoned| {
            self.journal.clear_poison();
            let mut j = poisoned.into_inner();
            let bytes = fs::read(&self.path).unwrap_or_default();
            *j = Journal { base: fnv(&bytes), base_len: bytes.len() as u64, ..Default::default() };
            j
        })
    }

    /// Journals changes once `links.toml` has reached `bytes` (default
    /// [`JOURNAL_FROM`]; 0: always).
    pub fn journal_from(mut self, bytes: u64) -> Self {
        self.journal_from = bytes;
        self
    }

    /// The path of the journal.
    pub fn journal_path(&self) -> &Path {
        &self.journal_path
    }

    /// Whether a journal file is there (this process's, or one left by the
    /// last): [`Store::save`] folds it into `links.toml` and removes it.
    pub fn journal_pending(&self) -> bool {
        self.journal_path.exists()
    }

    /// The path of `links.toml`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads `links.toml` and replays the journal onto it. A missing file is
    /// an empty [`LinkState`] of the current version; an invalid one is
    /// [`StoreError::Parse`], and the file is left as it is for the operator
    /// to fix.
    pub fn load(&self) -> Result<LinkState, StoreError> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // No file yet: what the journal holds, over nothing.
                let mut state = LinkState::default();
                self.replay(fnv(b""), &mut state)?;
                let mut j = self.journal();
                (j.base, j.base_len) = (fnv(b""), 0);
                return Ok(state);
            }
            Err(e) => return Err(io_err(&self.path, "read")(e)),
        };
        let parse_error = |loc: Location, message: String| StoreError::Parse {
            path: self.path.clone(),
            line: loc.line,
            column: loc.column,
            message,
            source_line: loc.source_line,
        };
        let (base, base_len) = (fnv(&bytes), bytes.len() as u64);
        let text =
            decode(bytes).map_err(|loc| parse_error(loc, "file is not valid UTF-8".to_owned()))?;
        let mut state: LinkState = toml::from_str(&text)
            .map_err(|err| parse_error(Location::of_toml(&text, &err), err.message().to_owned()))?;
        self.replay(base, &mut state)?;
        let mut j = self.journal();
        (j.base, j.base_len) = (base, base_len);
        Ok(state)
    }

    /// Applies the journal to `state` if it continues the `links.toml` of
    /// hash `base`. A last line cut short (a crash while appending) is
    /// dropped, every entry of its change with it: the change was never
    /// acknowledged. Any other bad line is a [`StoreError::Parse`] naming
    /// the journal and the line.
    fn replay(&self, base: u64, state: &mut LinkState) -> Result<(), StoreError> {
        let bytes = match fs::read(&self.journal_path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err(&self.journal_path, "read")(e)),
        };
        let mut lines = bytes.split_inclusive(|&b| b == b'\n').enumerate().peekable();
        let want = journal_header(base);
        match lines.next() {
            Some((_, h)) if h == want.as_bytes() => {}
            // Another links.toml's journal (the crash fell between writing
            // it whole and removing the journal), or a header never
            // finished: nothing in it was acknowledged on top of this file.
            _ => return Ok(()),
        }
        while let Some((i, line)) = lines.next() {
            let last = lines.peek().is_none();
            let bad = |message: String| StoreError::Parse {
                path: self.journal_path.clone(),
                line: i + 1,
                column: 1,
                message,
                source_line: String::from_utf8_lossy(line).trim_end().to_owned(),
            };
            let whole = line.last() == Some(&b'\n');
            let record = line.strip_suffix(b"\n").unwrap_or(line);
            let (sum, payload) = match record.iter().position(|&b| b == b' ') {
                Some(at) => (&record[..at], &record[at + 1..]),
                None => (record, &record[..0]),
            };
            let sum_ok = std::str::from_utf8(sum)
                .ok()
                .and_then(|s| u64::from_str_radix(s, 16).ok())
                .is_some_and(|s| s == fnv(payload));
            if !whole || !sum_ok {
                if last {
                    break;
                }
                return Err(bad("journal record damaged (checksum mismatch)".to_owned()));
            }
            // A change's entries (an array), or one entry alone (as
            // journals of earlier versions hold them).
            let entries: Vec<Entry> = if payload.first() == Some(&b'[') {
                serde_json::from_slice(payload)
            } else {
                serde_json::from_slice(payload).map(|e| vec![e])
            }
            .map_err(|e| bad(format!("journal record: {e}")))?;
            for e in &entries {
                e.validate().map_err(|e| bad(format!("journal record: {e}")))?;
            }
            for e in entries {
                e.apply(state);
            }
        }
        Ok(())
    }

    /// Records the change from `old` to `new` (the persistent configuration
    /// before and after a verb) durably: the changed entries appended to the
    /// journal and fsync'd; or `new` written whole ([`Store::save`]) while
    /// `links.toml` is smaller than [`JOURNAL_FROM`], when the journal has
    /// grown as large as `links.toml`, or when it cannot be appended to. Each entry is checked, and read back from what
    /// would be written, before anything is: a record that would not load is
    /// never written.
    pub fn append(&self, old: &LinkState, new: &LinkState) -> Result<(), StoreError> {
        self.check_version(new)?;
        let changes = diff(old, new);
        if changes.is_empty() {
            return Ok(());
        }
        for e in &changes {
            e.validate().map_err(|error| StoreError::Invalid { path: self.path.clone(), error })?;
        }
        // The whole change, one record: a crash while it is written loses
        // all of it (never acknowledged), not the entries after a cut.
        let json = serde_json::to_string(&changes).map_err(|e| StoreError::Serialize {
            path: self.journal_path.clone(),
            message: e.to_string(),
        })?;
        if serde_json::from_str::<Vec<Entry>>(&json).ok().as_ref() != Some(&changes) {
            return Err(StoreError::Serialize {
                path: self.journal_path.clone(),
                message: format!("record does not read back: {json}"),
            });
        }
        let text = format!("{:016x} {json}\n", fnv(json.as_bytes()));
        let mut j = self.journal();
        if j.base_len < self.journal_from {
            drop(j);
            return self.save(new);
        }
        if j.file.is_none() {
            match self.create_journal(j.base) {
                // Its length counts the header: a failed append cuts back
                // to it, never into it (which lost every record before).
                Ok(f) => (j.file, j.len) = (Some(f), journal_header(j.base).len() as u64),
                // One is there already (left by the last process, or ours
                // after a failed write): fold everything into links.toml.
                Err(_) => {
                    drop(j);
                    return self.save(new);
                }
            }
        }
        let len = j.len;
        let file = j.file.as_mut().expect("created");
        let written = file
            .write_all(text.as_bytes())
            .map_err(io_err(&self.journal_path, "append to"))
            .and_then(|()| {
                #[cfg(feature = "failpoints")]
                fail::fail_point!("store.journal.written", |a| {
                    fp(a, "store.journal.written", &self.journal_path)
                });
                file.sync_data().map_err(io_err(&self.journal_path, "fsync"))
            });
        if let Err(e) = written {
            // Cut what was written back off; the next change writes the
            // whole file instead of appending after a torn record.
            let _ = file.set_len(len);
            j.file = None;
            return Err(e);
        }
        j.len += text.len() as u64;
        let compact = j.len > j.base_len;
        drop(j);
        if compact {
            // The change is durable in the journal already; if writing the
            // whole file fails, the journal still holds it.
            let _ = self.save(new);
        }
        Ok(())
    }

    /// Creates the journal (mode 0600) with its header naming the
    /// `links.toml` of hash `base`, durably; fails if one is there.
    fn create_journal(&self, base: u64) -> Result<File, StoreError> {
        let p = &self.journal_path;
        let mut f = OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(p)
            .map_err(io_err(p, "create"))?;
        let header = journal_header(base);
        let done = f
            .write_all(header.as_bytes())
            .and_then(|()| f.sync_all())
            .and_then(|()| File::open(&self.dir)?.sync_all());
        if let Err(e) = done {
            let _ = fs::remove_file(p);
            return Err(io_err(p, "write header of")(e));
        }
        Ok(f)
    }

    /// Replaces `links.toml` with `state`, atomically and durably. An invalid
    /// state ([`LinkState::validate`]) is refused before anything is written.
    pub fn save(&self, state: &LinkState) -> Result<(), StoreError> {
        let staged = self.write_whole(state)?;
        self.install(staged)
    }

    /// What [`Store::append`] of `old` to `new` will write, done ahead
    /// where it can be, so that the caller can do its own work meanwhile
    /// (netadmd changes the hardware and the kernel): when the change
    /// would be written whole, `new` is written to a temporary file beside
    /// `links.toml` and fsync'd, for [`Store::commit`] to rename over it
    /// (or, dropped, to remove). `None` when there is nothing to write
    /// ahead: the change goes to the journal, or there is none.
    pub fn stage(&self, old: &LinkState, new: &LinkState) -> Result<Option<Staged>, StoreError> {
        self.check_version(new)?;
        if !self.writes_whole() || diff(old, new).is_empty() {
            return Ok(None);
        }
        self.write_whole(new).map(Some)
    }

    /// A state of another schema version than this netadm's is refused.
    fn check_version(&self, state: &LinkState) -> Result<(), StoreError> {
        if state.version == LinkState::VERSION {
            return Ok(());
        }
        Err(StoreError::Invalid {
            path: self.path.clone(),
            error: LinkStateError::UnsupportedVersion { found: state.version },
        })
    }

    /// Whether a change is written whole ([`Store::stage`] has something
    /// to do): while `links.toml` is smaller than the journal threshold.
    pub fn writes_whole(&self) -> bool {
        self.journal().base_len < self.journal_from
    }

    /// Records the change from `old` to `new` durably, with what
    /// [`Store::stage`] wrote ahead of it: the staged file renamed over
    /// `links.toml`, or, with none, as [`Store::append`] does.
    pub fn commit(
        &self,
        staged: Option<Staged>,
        old: &LinkState,
        new: &LinkState,
    ) -> Result<(), StoreError> {
        match staged {
            Some(s) => self.install(s),
            None => self.append(old, new),
        }
    }

    /// Writes `state` whole to a temporary file beside `links.toml`, and
    /// fsyncs it.
    fn write_whole(&self, state: &LinkState) -> Result<Staged, StoreError> {
        state.validate().map_err(|error| StoreError::Invalid { path: self.path.clone(), error })?;
        let body = to_toml(state)
            .map_err(|message| StoreError::Serialize { path: self.path.clone(), message })?;
        // tempfile: a fresh name in the same directory, 0600, removed if
        // anything below fails or the result is dropped (the next open()
        // removes one a crash left); `install` renames it over links.toml.
        let mut file = self.temp()?;
        let tmp = file.path().to_path_buf();
        let f = file.as_file_mut();
        let whole = [HEADER.as_bytes(), body.as_bytes()].concat();
        f.write_all(&whole).map_err(io_err(&tmp, "write"))?;
        #[cfg(feature = "failpoints")]
        fail::fail_point!("store.save.written", |a| fp(a, "store.save.written", &tmp));
        f.sync_all().map_err(io_err(&tmp, "fsync"))?;
        let file = file.into_temp_path();
        #[cfg(feature = "failpoints")]
        fail::fail_point!("store.save.fsynced", |a| fp(a, "store.save.fsynced", &tmp));
        Ok(Staged { file, base: fnv(&whole), len: whole.len() as u64 })
    }

    /// Renames a file [`Store::write_whole`] wrote over `links.toml`, and
    /// drops the journal it makes stale.
    fn install(&self, staged: Staged) -> Result<(), StoreError> {
        let mut j = self.journal();
        staged
            .file
            .persist(&self.path)
            .map_err(|e| io_err(&self.path, "rename temporary file over")(e.error))?;
        // The rename has happened: the new configuration is what the
        // directory holds, so it is what the caller must treat as saved.
        // Reporting a failed directory fsync as a failed save would make the
        // caller undo a change the file already records. The rename's
        // durability is best effort past this point.
        let _ = File::open(&self.dir).and_then(|d| {
            #[cfg(feature = "failpoints")]
            fail::fail_point!("store.save.renamed", |a| {
                crate::failpoint::injected("store.save.renamed", a, |e| e)
            });
            d.sync_all()
        });
        // The journal's changes are in the file now, and it names the old
        // file: drop it. Should the removal not happen, loading ignores it.
        (j.base, j.base_len) = (staged.base, staged.len);
        j.file = None;
        j.len = 0;
        if fs::remove_file(&self.journal_path).is_ok() {
            let _ = File::open(&self.dir).and_then(|d| d.sync_all());
        }
        Ok(())
    }

    /// Arms a checkpoint durably: `state` is what to roll back to at
    /// `deadline_ms` (ms since the Unix epoch), written beside `links.toml`
    /// (temporary file, fsync, rename, fsync of the directory) so that a
    /// netadmd started again inside the window still honours it.
    pub fn save_checkpoint(&self, deadline_ms: u64, state: &LinkState) -> Result<(), StoreError> {
        let path = self.dir.join(CHECKPOINT_FILE);
        state.validate().map_err(|error| StoreError::Invalid { path: path.clone(), error })?;
        let body = toml::to_string(&CheckpointFile { deadline_ms, state: state.clone() })
            .map_err(|e| StoreError::Serialize { path: path.clone(), message: e.to_string() })?;
        let mut file = self.temp()?;
        let tmp = file.path().to_path_buf();
        file.write_all(body.as_bytes()).map_err(io_err(&tmp, "write"))?;
        file.as_file().sync_all().map_err(io_err(&tmp, "fsync"))?;
        file.persist(&path).map_err(|e| io_err(&path, "rename temporary file over")(e.error))?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(io_err(&self.dir, "fsync"))
    }

    /// The armed checkpoint, if any: (deadline in ms since the Unix epoch,
    /// the configuration to roll back to).
    pub fn load_checkpoint(&self) -> Result<Option<(u64, LinkState)>, StoreError> {
        let path = self.dir.join(CHECKPOINT_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path, "read")(e)),
        };
        let parse_error = |loc: Location, message: String| StoreError::Parse {
            path: path.clone(),
            line: loc.line,
            column: loc.column,
            message,
            source_line: loc.source_line,
        };
        let text =
            decode(bytes).map_err(|loc| parse_error(loc, "file is not valid UTF-8".to_owned()))?;
        let cp: CheckpointFile = toml::from_str(&text)
            .map_err(|err| parse_error(Location::of_toml(&text, &err), err.message().to_owned()))?;
        Ok(Some((cp.deadline_ms, cp.state)))
    }

    /// Disarms the checkpoint (confirmed, or rolled back): removes the file.
    /// No file is no error. Once it is unlinked the checkpoint is disarmed,
    /// as the directory says; the removal's durability (the directory's
    /// fsync) is best effort, as a save's rename is.
    pub fn clear_checkpoint(&self) -> Result<(), StoreError> {
        let path = self.dir.join(CHECKPOINT_FILE);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err(&path, "remove")(e)),
        }
        let _ = File::open(&self.dir).and_then(|d| d.sync_all());
        Ok(())
    }

    /// A fresh temporary file next to `links.toml` (mode 0600), removed
    /// unless persisted (the next open() removes one a crash left).
    fn temp(&self) -> Result<tempfile::NamedTempFile, StoreError> {
        tempfile::Builder::new()
            .prefix(&format!("{TEMP_PREFIX}."))
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .tempfile_in(&self.dir)
            .map_err(io_err(&self.dir, "create a temporary file in"))
    }
}

/// A failpoint's `return`: the step fails as an I/O error on `path` would
/// (or the process aborts; see `crate::failpoint`).
#[cfg(feature = "failpoints")]
fn fp<T>(arg: Option<String>, name: &str, path: &Path) -> Result<T, StoreError> {
    crate::failpoint::injected(name, arg, io_err(path, "failpoint"))
}
