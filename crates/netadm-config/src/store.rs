//! Reading and atomically replacing `links.toml` in the state directory.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::links::{LinkState, LinkStateError};
use crate::location::{Location, Snippet, decode};

/// The file name of the persistent link configuration in the state directory.
pub const LINKS_FILE: &str = "links.toml";

/// Temporary files are `.links.toml.tmp.<pid>.<n>`; anything starting with
/// this prefix is left over from an interrupted save.
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
/// One process owns a state directory at a time; `Store` does not lock.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    path: PathBuf,
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
        Ok(Store { dir: dir.to_owned(), path: dir.join(LINKS_FILE) })
    }

    /// The path of `links.toml`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads `links.toml`. A missing file is an empty [`LinkState`] of the
    /// current version; an invalid one is [`StoreError::Parse`], and the file
    /// is left as it is for the operator to fix.
    pub fn load(&self) -> Result<LinkState, StoreError> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(LinkState::default()),
            Err(e) => return Err(io_err(&self.path, "read")(e)),
        };
        let parse_error = |loc: Location, message: String| StoreError::Parse {
            path: self.path.clone(),
            line: loc.line,
            column: loc.column,
            message,
            source_line: loc.source_line,
        };
        let text =
            decode(bytes).map_err(|loc| parse_error(loc, "file is not valid UTF-8".to_owned()))?;
        toml::from_str(&text)
            .map_err(|err| parse_error(Location::of_toml(&text, &err), err.message().to_owned()))
    }

    /// Replaces `links.toml` with `state`, atomically and durably. An invalid
    /// state ([`LinkState::validate`]) is refused before anything is written.
    pub fn save(&self, state: &LinkState) -> Result<(), StoreError> {
        state.validate().map_err(|error| StoreError::Invalid { path: self.path.clone(), error })?;
        let body = toml::to_string(state).map_err(|e| StoreError::Serialize {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        let (tmp, mut file) = self.create_temp()?;
        let written = (|| {
            file.write_all(HEADER.as_bytes()).map_err(io_err(&tmp, "write"))?;
            file.write_all(body.as_bytes()).map_err(io_err(&tmp, "write"))?;
            file.sync_all().map_err(io_err(&tmp, "fsync"))?;
            drop(file);
            fs::rename(&tmp, &self.path).map_err(io_err(&self.path, "rename temporary file over"))
        })();
        if let Err(e) = written {
            // Best effort: the next open() removes it anyway.
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        // The rename has happened: the new configuration is what the
        // directory holds, so it is what the caller must treat as saved.
        // Reporting a failed directory fsync as a failed save would make the
        // caller undo a change the file already records. The rename's
        // durability is best effort past this point.
        let _ = File::open(&self.dir).and_then(|d| d.sync_all());
        Ok(())
    }

    /// Creates a fresh temporary file next to `links.toml` (mode 0600).
    fn create_temp(&self) -> Result<(PathBuf, File), StoreError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let tmp = self.dir.join(format!("{TEMP_PREFIX}.{}.{n}", std::process::id()));
            match OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp) {
                Ok(file) => return Ok((tmp, file)),
                // Left by an earlier process with our pid: try the next name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err(&tmp, "create temporary file")(e)),
            }
        }
    }
}
