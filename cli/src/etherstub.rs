//! `show-etherstub`'s table (dladm's LINK), built from what the daemon
//! answered.

use netadm_dbus::EtherstubInfo;

use crate::render::{Cell, Row, Table};

/// `show-etherstub`.
pub fn table(v: &[EtherstubInfo]) -> Table {
    Table {
        columns: &["LINK"],
        rows: v.iter().map(|n| Row::new().cell("LINK", Cell::text(&n.link))).collect(),
    }
}
