//! Traffic generators on links (`start-traffic`, `show-traffic`), the
//! per-link counters (`show-link -s`), and the carrier of a port's wire
//! (`cut-cable`, `plug-cable`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use netadm_datapath::frame::HEADER;
use netadm_datapath::{GenConfig, Generator, Stream};
use netadm_model::LinkName;

use netadm_datapath::Tx;

use crate::timing::Timing;
use crate::view::{Link, View};
use crate::{CoreError, TrafficRow};

/// Most flows a stream may have.
const MAX_FLOWS: u32 = 4096;

struct Entry {
    stream: Arc<Stream>,
    generator: Option<Generator>,
    rate: u64,
    size: u32,
}

/// The generators, by the link they send from.
#[derive(Default)]
pub(crate) struct Traffic {
    entries: Mutex<BTreeMap<LinkName, Entry>>,
    next_id: AtomicU16,
}

/// What a generator sends through: a link's transmit path and the MAC it
/// sends from (`None` when the link's rings stopped).
pub(crate) type Path = Option<(Arc<dyn Tx>, [u8; 6])>;

/// What a generator is asked to send (`start-traffic`'s `-r`, `-s`, `-f`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Offer {
    /// Frames per second (0: as fast as the link takes).
    pub(crate) rate: u64,
    /// Frame size, bytes.
    pub(crate) size: u32,
    /// Flows.
    pub(crate) flows: u32,
}

impl Traffic {
    /// `start-traffic`: a generator on `link` (of the running
    /// configuration `v`, which the caller holds still), sending through
    /// what `path` gives, replacing a stopped one.
    pub(crate) fn start(
        &self,
        v: &View<'_>,
        path: impl FnOnce(&Link) -> Path,
        link: &str,
        offer: Offer,
        t: &mut Timing,
    ) -> Result<(), CoreError> {
        let Offer { rate, size, flows } = offer;
        let name: LinkName = link.parse()?;
        let l = v.require(link)?;
        let mtu = v.mtu(&l);
        let max = mtu + 14;
        // 60: the smallest Ethernet frame without FCS (and > the header).
        const MIN: u32 = 60;
        const _: () = assert!(HEADER as u32 <= MIN);
        if !(MIN..=max).contains(&size) {
            return Err(CoreError::invalid_value(format!(
                "frame size {size}: {link} carries {MIN}..={max} bytes (mtu {mtu})"
            )));
        }
        if flows == 0 || flows > MAX_FLOWS {
            return Err(CoreError::invalid_value(format!("flows {flows}: 1..={MAX_FLOWS}")));
        }
        if rate > 100_000_000 {
            return Err(CoreError::invalid_value(format!("rate {rate} pps: at most 100000000")));
        }
        let under = v.ports_under(&l);
        if let Some(d) = under.iter().find(|d| v.hw.port(d.as_str()).is_none()) {
            return Err(CoreError::not_supported(format!(
                "traffic generators run on netadm's own ports; {link} is over kernel port {}",
                v.phys_name(d)
            )));
        }
        let ports: Vec<_> = under.iter().filter_map(|d| v.hw.port(d.as_str())).collect();
        let running: Vec<_> = ports.iter().filter(|p| p.rings_started() > 0).collect();
        if running.is_empty() {
            return Err(CoreError::busy(format!(
                "{link} has no running rings; plumb it first (create-if, create-vnic or create-aggr)"
            )));
        }
        let (tx, src) = path(&l)
            .ok_or_else(|| CoreError::busy(format!("{link}: its rings stopped meanwhile")))?;
        let mut entries = self.entries.lock().unwrap();
        if entries.get(&name).is_some_and(|e| e.generator.is_some()) {
            return Err(CoreError::exists(format!(
                "traffic is already running on {link}; stop-traffic -l {link} first"
            )));
        }
        if let Some(old) = entries.remove(&name) {
            v.hw.streams().remove(old.stream.id());
        }
        // The next id no stream has (ids are 16 bits on the wire and wrap).
        let streams = v.hw.streams();
        let id = (0..=u16::MAX)
            .map(|_| self.next_id.fetch_add(1, Ordering::Relaxed).wrapping_add(1))
            .find(|&id| id != 0 && streams.get(id).is_none())
            .ok_or_else(|| CoreError::busy("every traffic stream id is in use"))?;
        let stream = Arc::new(Stream::new(id, flows as u16));
        v.hw.streams().insert(stream.clone());
        let cfg = GenConfig {
            // A locally administered address nobody has: the reflector
            // swaps it back, a cable delivers it to the far port.
            dst: [0x02, 0x08, 0x20, 0xff, 0xff, 0xfe],
            src,
            rate_pps: rate,
            size: size as usize,
            batch: 32,
            limit: None,
        };
        let generator = Generator::start(cfg, stream.clone(), tx);
        entries.insert(name, Entry { stream, generator: Some(generator), rate, size });
        t.phase("start");
        t.note(format!(
            "stream {id}: {flows} flow(s) of {size}-byte frames at {}",
            if rate == 0 { "line rate".to_owned() } else { format!("{rate} pps") }
        ));
        Ok(())
    }

    /// `stop-traffic`: stops the generator on `link`; its books stay.
    pub(crate) fn stop(&self, link: &str, t: &mut Timing) -> Result<(), CoreError> {
        let name: LinkName = link.parse()?;
        // Taken out under the lock, stopped (joined) outside it, so
        // show-traffic never waits for a generator thread to end.
        let g = self
            .entries
            .lock()
            .unwrap()
            .get_mut(&name)
            .and_then(|e| e.generator.take())
            .ok_or_else(|| CoreError::not_found(format!("no traffic is running on {link}")))?;
        g.stop();
        t.phase("stop");
        Ok(())
    }

    /// Links that are gone take their generator, books and stream with
    /// them: nothing grows with links that no longer exist.
    pub(crate) fn forget_gone(&self, v: &View<'_>) {
        let mut entries = self.entries.lock().unwrap();
        let gone: Vec<LinkName> =
            entries.keys().filter(|l| v.resolve(l.as_str()).is_none()).cloned().collect();
        for link in gone {
            if let Some(mut e) = entries.remove(&link) {
                if let Some(g) = e.generator.take() {
                    g.stop();
                }
                v.hw.streams().remove(e.stream.id());
            }
        }
    }

    /// Waits until the traffic from `link` has sent `n` frames in all,
    /// for at most `within`; whether it has. None: no traffic from `link`.
    pub(crate) fn wait_sent(&self, link: &str, n: u64, within: Duration) -> Option<bool> {
        let stream = {
            let entries = self.entries.lock().unwrap();
            entries.iter().find(|(l, _)| l.as_str() == link).map(|(_, e)| e.stream.clone())?
        };
        Some(stream.wait_sent(n, within))
    }

    /// `show-traffic`.
    pub(crate) fn rows(&self) -> Vec<TrafficRow> {
        let entries = self.entries.lock().unwrap();
        entries
            .iter()
            .map(|(link, e)| {
                let s = e.stream.stats();
                TrafficRow {
                    link: link.to_string(),
                    running: e.generator.is_some(),
                    rate: e.rate,
                    size: e.size,
                    flows: e.stream.flows(),
                    sent: s.sent,
                    received: s.received,
                    lost: s.lost,
                    reordered: s.reordered,
                    duplicated: s.duplicated,
                    latency_avg_us: s.latency_avg_ns as f64 / 1e3,
                    latency_p99_us: s.latency_p99_ns as f64 / 1e3,
                    latency_max_us: s.latency_max_ns as f64 / 1e3,
                    pause_max_us: s.pause_max_ns as f64 / 1e3,
                    paused_us: s.paused_ns as f64 / 1e3,
                }
            })
            .collect()
    }
}
