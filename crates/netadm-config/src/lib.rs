//! netadm's configuration files.
//!
//! Two files, two lifetimes:
//!
//! - **Hardware configuration** ([`HardwareConfig`], `netadm.toml`): what the
//!   emulated machine has — its ports, their NIC class and queue sizing, and
//!   what each port's wire is connected to. Read once at daemon start; the
//!   shipped default is compiled in as [`EMBEDDED_DEFAULT`].
//! - **Persistent link configuration** ([`LinkState`], `links.toml` in the
//!   state directory): what the operator configured (renamed links,
//!   aggregations, VNICs, IP interfaces and addresses, link properties).
//!   Read and written through a [`Store`], which replaces the file atomically,
//!   and between two such rewrites appends each change to a journal
//!   (`links.journal`) that loading replays.
//!
//! Every string in either file becomes a validated `netadm-model` type while
//! parsing, and every error names the file and the 1-based line and column of
//! the offending text, so an operator can fix a hand-edited file directly.
//! This crate does file I/O but has no async runtime.

mod document;
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub mod failpoint;
mod flow_attrs;
mod hardware;
mod links;
mod location;
mod props;
mod section;
mod spelling;
mod store;

pub use document::{DocError, DocErrorKind, DocFormat, Document, dotted};
pub use hardware::{
    ATL1C_DEFAULT_SPEED, ConfigError, EMBEDDED_DEFAULT, HardwareConfig, HardwareError,
    I40E_DEFAULT_QUEUE_PAIRS, I40E_DEFAULT_SPEED, I40E_DEFAULT_VECTORS, I40E_MAX_QUEUE_PAIRS,
    I40E_MAX_VECTORS, PortClass, PortConfig, RING_SIZE_MAX, RING_SIZE_MIN, SPEED_MAX, SPEED_MIN,
    StubKind, Wire,
};
pub use links::{
    AddrConf, AddrError, AddrType, AggrConf, EtherstubConf, FlowConf, IfConf, LinkState,
    LinkStateError, MAC_MODES, MacModeError, PhysConf, Section, VnicConf, check_mac_mode,
    parse_addr_prefix,
};
pub use props::LinkProps;
pub use store::{
    CHECKPOINT_FILE, Entry, JOURNAL_FILE, JOURNAL_FROM, LINKS_FILE, Staged, Store, StoreError,
    diff, to_json, to_toml,
};
