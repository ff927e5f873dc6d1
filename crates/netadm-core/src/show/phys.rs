//! What `show-phys -m`, `show-phys -L` and `show-ether` say of the
//! physical links: their factory MAC address slots and who uses each,
//! where their devices are, and their Ethernet settings. Each port says
//! what it knows through [`PhysPort`]; what it cannot say is empty.

use netadm_model::{LinkName, MacAddr};

use super::Reads;
use crate::ports::{PhysPort, SpeedDuplex};
use crate::view::View;
use crate::{CoreError, EtherRow, PhysLocRow, PhysMacRow};

/// The `n`th factory address (from 0) a VNIC can take over a port whose
/// own address is `base` (`create-vnic -m factory`): the same rule as
/// the verb's.
fn factory_slot(base: MacAddr, mac: MacAddr) -> Option<u16> {
    let (b, m) = (base.0, mac.0);
    (m[..4] == b[..4] && m[4] == b[4] | 0x80).then(|| u16::from(m[5].wrapping_sub(b[5])) + 1)
}

/// dladm's spelling of one speed and duplex: `40G-f`, `100M-h`, `2.5G-f`.
pub(crate) fn speed_duplex(sd: &SpeedDuplex) -> String {
    let speed = match sd.speed {
        0 => return String::new(),
        s if s >= 1000 && s % 1000 == 0 => format!("{}G", s / 1000),
        s if s >= 1000 => format!("{}G", s as f64 / 1000.0),
        s => format!("{s}M"),
    };
    let duplex = match sd.duplex {
        "full" => "f",
        "half" => "h",
        _ => "u",
    };
    format!("{speed}-{duplex}")
}

/// A list of modes as dladm prints it: one speed each, its duplexes
/// joined (`1G-fh,100M-fh`), fastest first.
fn modes(list: &[SpeedDuplex]) -> String {
    let mut speeds: Vec<u64> = list.iter().map(|m| m.speed).collect();
    speeds.sort_unstable_by(|a, b| b.cmp(a));
    speeds.dedup();
    let mut out = Vec::new();
    for s in speeds {
        let mut d = String::new();
        for (duplex, c) in [("full", 'f'), ("half", 'h')] {
            if list.iter().any(|m| m.speed == s && m.duplex == duplex) {
                d.push(c);
            }
        }
        let one = speed_duplex(&SpeedDuplex { speed: s, duplex: "unknown" });
        let one = one.trim_end_matches("-u");
        out.push(if d.is_empty() { one.to_owned() } else { format!("{one}-{d}") });
    }
    out.join(",")
}

fn yes_no(b: Option<bool>) -> String {
    b.map(|b| if b { "yes" } else { "no" }.to_owned()).unwrap_or_default()
}

impl Reads<'_> {
    /// The physical ports with their link names, in the machine's order.
    fn phys_named<'v>(
        &'v self,
        v: &'v View<'v>,
    ) -> impl Iterator<Item = (LinkName, &'v dyn PhysPort)> + 'v {
        self.m.hw().phys().map(move |p| (v.phys_name(p.device()), p))
    }

    /// `show-phys -m`: each port's own address (slot `primary`), used by
    /// its aggregation or its IP interface, and every factory address a
    /// VNIC over it holds.
    pub(crate) fn show_phys_mac(&self) -> Vec<PhysMacRow> {
        let v = View { hw: self.m.hw(), st: &self.running };
        let mut rows = Vec::new();
        for (name, p) in self.phys_named(&v) {
            let client = match v.aggr_of(&name) {
                Some(a) => a.to_string(),
                None if v.st.interface.contains_key(&name) => name.to_string(),
                None => String::new(),
            };
            rows.push(PhysMacRow {
                link: name.to_string(),
                slot: "primary".into(),
                address: p.mac().to_string(),
                inuse: !client.is_empty(),
                client,
            });
            let mut held: Vec<(u16, MacAddr, &LinkName)> = v
                .vnics_over(&name)
                .into_iter()
                .filter_map(|n| {
                    let c = &v.st.vnic[n];
                    let slot = factory_slot(p.mac(), c.mac).filter(|_| c.mac_mode == "factory")?;
                    Some((slot, c.mac, n))
                })
                .collect();
            held.sort();
            rows.extend(held.into_iter().map(|(slot, mac, n)| PhysMacRow {
                link: name.to_string(),
                slot: slot.to_string(),
                address: mac.to_string(),
                inuse: true,
                client: n.to_string(),
            }));
        }
        rows
    }

    /// `show-phys -L`: each port's device and where it is.
    pub(crate) fn show_phys_loc(&self) -> Vec<PhysLocRow> {
        let v = View { hw: self.m.hw(), st: &self.running };
        self.phys_named(&v)
            .map(|(name, p)| PhysLocRow {
                link: name.to_string(),
                device: p.device().to_string(),
                location: p.location().unwrap_or_default(),
            })
            .collect()
    }

    /// `show-ether`: of physical link `link` (every one when empty), the
    /// `current` line, and with `extended` the `capable`, `adv` and
    /// `peeradv` lines. A name that is no physical link is `NotFound`.
    pub(crate) fn show_ether(
        &self,
        link: &str,
        extended: bool,
    ) -> Result<Vec<EtherRow>, CoreError> {
        let v = View { hw: self.m.hw(), st: &self.running };
        let mut rows = Vec::new();
        let mut found = link.is_empty();
        for (name, p) in self.phys_named(&v) {
            if !link.is_empty() && name.as_str() != link {
                continue;
            }
            found = true;
            let s = p.status();
            let e = p.ether();
            let state = match s.carrier {
                Some(true) => "up",
                Some(false) => "down",
                None => "unknown",
            };
            let current = SpeedDuplex { speed: s.speed, duplex: s.duplex };
            let row = |ptype: &str, state: &str, auto: String, sd: String| EtherRow {
                link: name.to_string(),
                ptype: ptype.into(),
                state: state.into(),
                auto,
                speed_duplex: sd,
                pause: e.pause.unwrap_or_default().into(),
            };
            rows.push(row("current", state, yes_no(e.autoneg), speed_duplex(&current)));
            if extended {
                let list =
                    |l: &Option<Vec<SpeedDuplex>>| l.as_deref().map(modes).unwrap_or_default();
                rows.push(row("capable", "", yes_no(e.autoneg_capable), list(&e.capable)));
                rows.push(row("adv", "", yes_no(e.autoneg), list(&e.advertised)));
                rows.push(row("peeradv", "", String::new(), list(&e.peer)));
            }
        }
        if !found {
            return Err(CoreError::not_found(format!("physical link {link} does not exist")));
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dladm_spells_speeds_and_duplexes() {
        let sd = |speed, duplex| SpeedDuplex { speed, duplex };
        assert_eq!(speed_duplex(&sd(40_000, "full")), "40G-f");
        assert_eq!(speed_duplex(&sd(100, "half")), "100M-h");
        assert_eq!(speed_duplex(&sd(2500, "full")), "2.5G-f");
        assert_eq!(speed_duplex(&sd(0, "unknown")), "");
        let list = [sd(100, "full"), sd(1000, "full"), sd(100, "half"), sd(10, "half")];
        assert_eq!(modes(&list), "1G-f,100M-fh,10M-h");
    }

    #[test]
    fn factory_slots_follow_create_vnic() {
        let base = MacAddr([0, 0x1b, 0x21, 1, 2, 0xfe]);
        assert_eq!(factory_slot(base, MacAddr([0, 0x1b, 0x21, 1, 0x82, 0xfe])), Some(1));
        assert_eq!(factory_slot(base, MacAddr([0, 0x1b, 0x21, 1, 0x82, 0x01])), Some(4));
        assert_eq!(factory_slot(base, MacAddr([2, 0x1b, 0x21, 1, 0x82, 0xfe])), None);
    }
}
