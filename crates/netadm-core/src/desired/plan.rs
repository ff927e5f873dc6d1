//! An apply's plan, in the order the operation does them: the
//! configuration's entries (removals first, a link before what goes over
//! it), what the machine does (each port's rings, the kernel's changes),
//! and one save.

use netadm_config::LinkState;

use crate::machine::Machine;
use crate::{CoreError, PlanStep};

/// A step of the plan.
pub(crate) fn step(kind: &str, object: String, action: String) -> PlanStep {
    PlanStep { kind: kind.into(), object, action, ..Default::default() }
}

/// The plan of going from `cur` to `next` (and the persistent
/// configuration from `persisted` to `next`): the configuration
/// entries, each port's rings, the kernel's changes, the save.
pub(crate) fn steps(
    m: &Machine,
    cur: &LinkState,
    persisted: &LinkState,
    next: &LinkState,
) -> Result<Vec<PlanStep>, CoreError> {
    let mut steps = vec![];
    // Entries, removals first (what depends on a link goes before it),
    // then additions and changes (a link before what goes over it).
    fn section<K: Ord + Clone + std::fmt::Display, V: PartialEq + Clone>(
        what: &str,
        a: &netadm_config::Section<K, V>,
        b: &netadm_config::Section<K, V>,
        gone: &mut Vec<PlanStep>,
        come: &mut Vec<PlanStep>,
    ) {
        for (k, was, now) in a.diff(b) {
            let object = format!("{what} {k}");
            match (was, now) {
                (Some(_), None) => gone.push(step("config", object, "delete".into())),
                (None, Some(_)) => come.push(step("config", object, "create".into())),
                _ => come.push(step("config", object, "modify".into())),
            }
        }
    }
    let (mut gone, mut come) = (vec![], vec![]);
    section("flow", &cur.flow, &next.flow, &mut gone, &mut come);
    section("address", &cur.address, &next.address, &mut gone, &mut come);
    section("interface", &cur.interface, &next.interface, &mut gone, &mut come);
    section("vnic", &cur.vnic, &next.vnic, &mut gone, &mut come);
    section("etherstub", &cur.etherstub, &next.etherstub, &mut gone, &mut come);
    section("aggr", &cur.aggr, &next.aggr, &mut gone, &mut come);
    section("phys", &cur.phys, &next.phys, &mut gone, &mut come);
    section("protocol property", &cur.proto, &next.proto, &mut gone, &mut come);
    come.reverse();
    steps.extend(gone);
    steps.extend(come);
    // The machine: each port's rings, the kernel's changes.
    steps.extend(m.plan_steps(cur, next)?);
    let entries = netadm_config::diff(persisted, next).len();
    if entries > 0 {
        steps.push(step(
            "persist",
            "links.toml".into(),
            format!("one save ({entries} entries change)"),
        ));
    }
    Ok(steps)
}
