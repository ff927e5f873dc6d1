//! What mutating verbs print: a one-line summary (plus notes) for people,
//! one JSON object for scripts.

use netadm_dbus::OpResult;
use serde_json::{Value, json};

/// Counts the summary names, in the order it names them, with how.
const KNOWN_COUNTS: &[(&str, CountKind)] = &[
    ("rings_started", CountKind::Plain("rings started")),
    ("rings_stopped", CountKind::Plain("rings stopped")),
    ("dma_allocated", CountKind::Bytes("DMA allocated")),
    ("dma_freed", CountKind::Bytes("DMA freed")),
    ("rx_discarded", CountKind::Plain("RX frames discarded")),
];

#[derive(Debug, Clone, Copy)]
enum CountKind {
    /// `N <label>`.
    Plain(&'static str),
    /// `X.Y MiB <label>`.
    Bytes(&'static str),
}

/// Microseconds as milliseconds with one decimal: `10.0 ms`.
pub fn ms(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

/// Bytes in binary units with one decimal: `776.0 MiB`, `512 B`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// The people's form: `<op> <object>: <total> (<phases>); <counts>`, then
/// `note: ...` lines. Only top-level phases (no `/` in the name) and
/// non-zero counts are shown; the rest is in the JSON.
pub fn summary(object: &str, r: &OpResult) -> String {
    let mut s = format!("{} {object}: {}", r.op, ms(r.total_us));
    let phases: Vec<String> = r
        .phases
        .iter()
        .filter(|(name, _)| !name.contains('/'))
        .map(|(name, us)| format!("{name} {}", ms(*us)))
        .collect();
    if !phases.is_empty() {
        s.push_str(&format!(" ({})", phases.join(", ")));
    }
    let mut counts = Vec::new();
    for (key, kind) in KNOWN_COUNTS {
        match (r.counts.get(*key).copied().unwrap_or(0), kind) {
            (0, _) => {}
            (n, CountKind::Plain(label)) => counts.push(format!("{n} {label}")),
            (n, CountKind::Bytes(label)) => counts.push(format!("{} {label}", bytes(n))),
        }
    }
    for (key, n) in &r.counts {
        if *n != 0 && !KNOWN_COUNTS.iter().any(|(k, _)| k == key) {
            counts.push(format!("{key} {n}"));
        }
    }
    if !counts.is_empty() {
        s.push_str("; ");
        s.push_str(&counts.join(", "));
    }
    for note in &r.notes {
        s.push_str("\nnote: ");
        s.push_str(note);
    }
    s.push('\n');
    s
}

/// The JSON form: `{"op", "object", "timing": {"total_us", "phases": [{"name",
/// "us"}]}, "counts", "notes"}`, with every phase and count.
pub fn to_json(object: &str, r: &OpResult) -> Value {
    let phases: Vec<Value> =
        r.phases.iter().map(|(name, us)| json!({ "name": name, "us": us })).collect();
    json!({
        "op": r.op,
        "object": object,
        "timing": { "total_us": r.total_us, "phases": phases },
        "counts": r.counts,
        "notes": r.notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result() -> OpResult {
        OpResult {
            op: "create-aggr".into(),
            total_us: 10_040,
            phases: vec![
                ("validate".into(), 180),
                ("ring-start".into(), 8_860),
                ("ring-start/enable".into(), 120),
                ("persist".into(), 1_000),
            ],
            counts: [
                ("rings_started".to_owned(), 512),
                ("rings_stopped".to_owned(), 0),
                ("dma_allocated".to_owned(), 776 * 1024 * 1024),
                ("dma_freed".to_owned(), 0),
            ]
            .into_iter()
            .collect(),
            notes: vec![],
        }
    }

    #[test]
    fn summary_line() {
        assert_eq!(
            summary("aggr0", &result()),
            "create-aggr aggr0: 10.0 ms (validate 0.2 ms, ring-start 8.9 ms, persist 1.0 ms); \
             512 rings started, 776.0 MiB DMA allocated\n"
        );
    }

    #[test]
    fn summary_without_phases_counts_with_notes_and_unknown_counts() {
        let r = OpResult {
            op: "create-if".into(),
            total_us: 1_234,
            phases: vec![],
            counts: [("widgets".to_owned(), 3), ("rx_discarded".to_owned(), 7)]
                .into_iter()
                .collect(),
            notes: vec!["no kernel device was made".into(), "second".into()],
        };
        assert_eq!(
            summary("net0", &r),
            "create-if net0: 1.2 ms; 7 RX frames discarded, widgets 3\n\
             note: no kernel device was made\nnote: second\n"
        );
        let quiet = OpResult { op: "delete-if".into(), total_us: 50, ..Default::default() };
        assert_eq!(summary("net0", &quiet), "delete-if net0: 0.1 ms\n");
    }

    #[test]
    fn byte_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
    }

    #[test]
    fn json_keeps_everything() {
        let v = to_json("aggr0", &result());
        assert_eq!(v["op"], "create-aggr");
        assert_eq!(v["object"], "aggr0");
        assert_eq!(v["timing"]["total_us"], 10_040);
        assert_eq!(v["timing"]["phases"][2], json!({"name": "ring-start/enable", "us": 120}));
        assert_eq!(v["counts"]["rings_stopped"], 0);
        assert_eq!(v["notes"], json!([]));
    }
}
