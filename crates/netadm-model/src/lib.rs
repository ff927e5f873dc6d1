//! netadm's pure domain model: validated names, addresses and link properties.
//!
//! "Parse, don't validate": every untrusted string (CLI argument, D-Bus
//! argument, config file field) becomes one of these types through `FromStr`
//! or `TryFrom`, and holding a value of the type is proof it is valid. Each
//! failure is a variant of a `thiserror` enum carrying the offending input, so
//! the message tells an operator exactly what is wrong, e.g.
//! `link name "0abc": must start with a letter`.
//!
//! This crate has no I/O, no async runtime and no D-Bus dependencies; every
//! other netadm crate may depend on it. With the optional `serde` feature the
//! string-like types (`LinkName`, `LinkClass`, `AddrObj`, `MacAddr`, `VlanId`,
//! `AggrPolicy`, `LacpMode`, `LacpTimer`, `PropName`) serialize as their
//! `Display` string and deserialize through `FromStr`.

// First: its macro declares the keyword enums of the others.
#[macro_use]
mod keyword;

mod addrobj;
mod aggr;
mod answers;
mod flow;
mod link;
mod mac;
mod prop;
pub mod protect;
#[cfg(feature = "serde")]
mod serde_impls;
mod vlan;
mod word;

pub use addrobj::{AddrObj, AddrObjError};
pub use aggr::{AggrLayer, AggrPolicy, AggrPolicyError, LacpMode, LacpTimer};
pub use flow::{DsField, FLOW_ATTRS, FlowAttrs, FlowError, FlowName, Transport};
pub use keyword::KeywordError;
pub use link::{LinkClass, LinkName, LinkNameError};
pub use mac::{MacAddr, MacAddrError};
pub use prop::{
    DEFAULT_PRIORITY, PRIORITIES, Perm, PropError, PropName, PropSpec, PropType, PropValue,
    parse_assignments, parse_bandwidth, parse_prop_names, spec, split_assignments,
};
pub use protect::{ClientId, IpPrefix, ProtectError, Protection};
pub use vlan::{VlanId, VlanIdError};
