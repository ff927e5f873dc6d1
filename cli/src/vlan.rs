//! `show-vlan`'s table (dladm's LINK VID OVER FLAGS), built from what the
//! daemon answered.

use netadm_dbus::VlanInfo;

use crate::render::{Cell, Row, Table};

/// `show-vlan`.
pub fn table(v: &[VlanInfo]) -> Table {
    Table {
        columns: &["LINK", "VID", "OVER", "FLAGS"],
        rows: v
            .iter()
            .map(|n| {
                Row::new()
                    .cell("LINK", Cell::text(&n.link))
                    .cell("VID", Cell::num(n.vid))
                    .cell("OVER", Cell::text(&n.over))
                    .cell("FLAGS", Cell::text(&n.flags))
            })
            .collect(),
    }
}
