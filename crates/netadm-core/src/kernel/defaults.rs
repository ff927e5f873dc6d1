//! What each kernel port's channels and offloads were before netadm
//! first set them: what a property going back to unset (`reset-linkprop`,
//! the undo of a change that set it) puts back. The kernel keeps no
//! default of its own to go back to: a driver's channel count and
//! offloads at probe are not asked for again. The same for the sysctls
//! of a kernel device netadm puts an IP interface on (SLAAC, forwarding),
//! which the mirror puts back when the interface goes.
//!
//! Kept in the state directory (`kernel-defaults.json`: device, then
//! setting, to its value), written before the kernel is changed, so a
//! netadmd started again still knows them; a value goes once it is put
//! back. A netadmd without a state directory keeps them in memory.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::CoreError;

/// The file, in the state directory.
pub(crate) const FILE: &str = "kernel-defaults.json";

/// Device name (`ZONE/NAME` in a zone), then setting (`tso`, `tx-csum`,
/// `rx-csum`: 0 or 1; `combined`, `rx`, `tx`: a channel count;
/// `ipv6/accept_ra` and the like: a sysctl), to its value.
type Values = BTreeMap<String, BTreeMap<String, u64>>;

/// The values remembered, and where they are kept.
#[derive(Debug, Default)]
pub(crate) struct Defaults {
    path: Option<PathBuf>,
    values: Mutex<Values>,
}

impl Defaults {
    /// Those kept in state directory `dir` (none yet: none kept).
    pub(crate) fn load(dir: Option<&Path>) -> Result<Self, CoreError> {
        let path = dir.map(|d| d.join(FILE));
        let values = match &path {
            Some(p) => match std::fs::read(p) {
                Ok(b) => serde_json::from_slice(&b)
                    .map_err(|e| CoreError::persistence(format!("{}: {e}", p.display())))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Values::new(),
                Err(e) => {
                    return Err(CoreError::persistence(format!("{}: {e}", p.display())));
                }
            },
            None => Values::new(),
        };
        Ok(Self { path, values: Mutex::new(values) })
    }

    /// Device `dev`'s settings `now` (the kernel's values now, read only
    /// when needed) remembered, each unless one is already: before netadm
    /// sets them.
    pub(crate) fn remember(
        &self,
        dev: &str,
        keys: &[&str],
        now: impl FnOnce() -> Result<BTreeMap<String, u64>, CoreError>,
    ) -> Result<(), CoreError> {
        let mut v = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        let have = v.get(dev);
        if keys.iter().all(|k| have.is_some_and(|h| h.contains_key(*k))) {
            return Ok(());
        }
        let mut next = v.clone();
        let entry = next.entry(dev.to_owned()).or_default();
        for (k, val) in now()? {
            entry.entry(k).or_insert(val);
        }
        self.save(&next)?;
        *v = next;
        Ok(())
    }

    /// What device `dev`'s setting `key` was, if remembered.
    pub(crate) fn recall(&self, dev: &str, key: &str) -> Option<u64> {
        let v = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        v.get(dev).and_then(|d| d.get(key)).copied()
    }

    /// Device `dev`'s settings `keys` put back: no longer remembered.
    pub(crate) fn forget(&self, dev: &str, keys: &[&str]) -> Result<(), CoreError> {
        let mut v = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        if !keys.iter().any(|k| v.get(dev).is_some_and(|d| d.contains_key(*k))) {
            return Ok(());
        }
        let mut next = v.clone();
        if let Some(d) = next.get_mut(dev) {
            d.retain(|k, _| !keys.contains(&k.as_str()));
            if d.is_empty() {
                next.remove(dev);
            }
        }
        self.save(&next)?;
        *v = next;
        Ok(())
    }

    /// `values` written whole: a temporary file, fsync'd, renamed over
    /// the file, the directory fsync'd.
    fn save(&self, values: &Values) -> Result<(), CoreError> {
        let Some(path) = &self.path else { return Ok(()) };
        let err = |what: &str, e: std::io::Error| {
            CoreError::persistence(format!("{}: {what}: {e}", path.display()))
        };
        let tmp = path.with_extension("json.tmp");
        let body = serde_json::to_vec_pretty(values).expect("a map of maps of numbers");
        let mut f = std::fs::File::create(&tmp).map_err(|e| err("create", e))?;
        f.write_all(&body).and_then(|()| f.sync_all()).map_err(|e| err("write", e))?;
        std::fs::rename(&tmp, path).map_err(|e| err("rename", e))?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| err("fsync", e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_remembered_once_kept_across_a_load_and_gone_once_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let now = |tso: u64| move || Ok(BTreeMap::from([("tso".to_owned(), tso)]));
        let d = Defaults::load(Some(dir.path())).unwrap();
        d.remember("eth0", &["tso"], now(1)).unwrap();
        // Set again: the first value stays, and the kernel is not asked.
        d.remember("eth0", &["tso"], || panic!("asked again")).unwrap();
        let again = Defaults::load(Some(dir.path())).unwrap();
        assert_eq!(again.recall("eth0", "tso"), Some(1));
        again.forget("eth0", &["tso"]).unwrap();
        assert_eq!(Defaults::load(Some(dir.path())).unwrap().recall("eth0", "tso"), None);
        // A later set remembers what the kernel has then.
        again.remember("eth0", &["tso"], now(0)).unwrap();
        assert_eq!(again.recall("eth0", "tso"), Some(0));
    }

    #[test]
    fn a_file_that_is_not_json_is_a_persistence_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "tso = on").unwrap();
        let e = Defaults::load(Some(dir.path())).unwrap_err();
        assert!(e.message.contains(FILE), "{}", e.message);
    }
}
