//! `show-config`, `apply`, `confirm` and `rollback`: desired state.

use std::io::Read;

use netadm_dbus::ApplyResult;
use serde_json::{Value, json};

use crate::error::CliError;
use crate::opresult;

/// Reads the document: a file, or standard input for `-`.
pub fn read_document(file: &str) -> Result<String, CliError> {
    let mut text = String::new();
    let res = if file == "-" {
        std::io::stdin().read_to_string(&mut text).map(drop)
    } else {
        std::fs::read_to_string(file).map(|t| text = t)
    };
    res.map_err(|e| CliError::invalid_argument(format!("{}: {e}", name(file))))?;
    Ok(text)
}

/// How the document is named in messages.
pub fn name(file: &str) -> &str {
    if file == "-" { "<stdin>" } else { file }
}

/// A plan as JSON: each step with its cost.
pub fn to_json(r: &ApplyResult) -> Value {
    let steps: Vec<Value> = r
        .steps
        .iter()
        .map(|s| {
            json!({
                "kind": s.kind,
                "object": s.object,
                "action": s.action,
                "cost": {
                    "rings_stopped": s.rings_stopped,
                    "rings_started": s.rings_started,
                    "rings_restarted": s.rings_restarted,
                    "kernel_changes": s.kernel_changes,
                },
            })
        })
        .collect();
    let mut v = json!({
        "changed": r.changed,
        "dry_run": r.dry_run,
        "plan": steps,
    });
    if r.confirm_deadline_ms > 0 {
        v["confirm_deadline_ms"] = json!(r.confirm_deadline_ms);
    }
    if !r.dry_run && r.changed {
        v["result"] = opresult::to_json("document", &r.result);
    }
    v
}

/// The plan for people: one line per step with its cost, then what
/// happened.
pub fn summary(r: &ApplyResult) -> String {
    let mut s = String::new();
    if !r.changed {
        s.push_str("no change: the configuration is the document already\n");
        return s;
    }
    s.push_str(if r.dry_run { "plan (dry run, nothing changed):\n" } else { "plan:\n" });
    let w = r.steps.iter().map(|x| x.object.len()).max().unwrap_or(0);
    for (i, x) in r.steps.iter().enumerate() {
        let mut cost = vec![];
        for (n, what) in [
            (x.rings_stopped, "stopped"),
            (x.rings_started, "started"),
            (x.rings_restarted, "restarted"),
        ] {
            if n > 0 {
                cost.push(format!("{n} rings {what}"));
            }
        }
        if x.kernel_changes > 0 {
            cost.push(format!("{} kernel changes", x.kernel_changes));
        }
        let cost = if cost.is_empty() { String::new() } else { format!("  [{}]", cost.join(", ")) };
        s.push_str(&format!("{:>3}. {:<7} {:<w$}  {}{cost}\n", i + 1, x.kind, x.object, x.action));
    }
    if !r.dry_run {
        s.push_str(&opresult::summary("document", &r.result));
    }
    if r.confirm_deadline_ms > 0 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        s.push_str(&format!(
            "checkpoint armed: rolls back in {} s unless `netadm confirm`\n",
            r.confirm_deadline_ms.saturating_sub(now).div_ceil(1000)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use netadm_dbus::PlanStep;

    #[test]
    fn plan_json_has_costs_and_changed() {
        let r = ApplyResult {
            changed: true,
            dry_run: true,
            steps: vec![PlanStep {
                kind: "rings".into(),
                object: "port i40e0".into(),
                action: "start 4 rings".into(),
                rings_started: 4,
                ..Default::default()
            }],
            ..Default::default()
        };
        let v = to_json(&r);
        assert_eq!(v["changed"], true);
        assert_eq!(v["plan"][0]["cost"]["rings_started"], 4);
        assert!(v.get("result").is_none());
        assert!(summary(&r).contains("[4 rings started]"), "{}", summary(&r));
    }
}
