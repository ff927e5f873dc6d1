//! Desired state end to end: `netadm show-config` and `netadm apply` (plan,
//! dry run, one operation, no-op when applied back, bad documents refused
//! naming file, line and key), and commit-confirmed checkpoints (confirm,
//! rollback, rolled back by netadmd alone, also across a restart). The
//! kernel half (TAPs and addresses made and read back; a failure at the
//! kernel step driven back entirely, naming the step; a name the kernel
//! refuses) runs netadmd in a network namespace this test makes (root and
//! iproute2; skipped otherwise, failed under `CI=true`).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use netadm_testkit::*;
use serde_json::Value;

/// The desired state the tests apply (line numbers in it are asserted).
const DOC: &str = include_str!("data/net.toml");

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn apply(bus: &Bus, args: &[&str]) -> Value {
    let mut a = vec!["apply"];
    a.extend_from_slice(args);
    json(bus, &a)
}

fn apply_err(bus: &Bus, args: &[&str]) -> (String, String) {
    let mut a = vec!["apply"];
    a.extend_from_slice(args);
    json_err(bus, &a)
}

fn steps<'a>(v: &'a Value, kind: &str) -> Vec<&'a Value> {
    v["plan"].as_array().unwrap().iter().filter(|s| s["kind"] == kind).collect()
}

fn cost(v: &Value, what: &str) -> u64 {
    v["plan"].as_array().unwrap().iter().map(|s| s["cost"][what].as_u64().unwrap()).sum()
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

#[test]
fn apply_plans_runs_as_one_operation_and_show_config_applies_back_as_a_no_op() {
    let bus = Bus::start();
    let state = bus.subdir("state");
    let d = Daemon::start(&bus, &state, &[]);
    let dir = bus.subdir("docs");
    let empty = show_config(&bus);
    assert!(empty.contains("version = 1"), "{empty}");
    let doc = write(&dir, "net.toml", DOC);
    let f = doc.to_str().unwrap();

    // Dry run: the plan, in order, with costs; nothing changes.
    let plan = apply(&bus, &["--dry-run", "-f", f]);
    assert_eq!(plan["changed"], true, "{plan}");
    assert_eq!(plan["dry_run"], true);
    let config: Vec<&str> =
        steps(&plan, "config").iter().map(|s| s["object"].as_str().unwrap()).collect();
    // A link before what goes over it.
    let at = |o: &str| config.iter().position(|c| *c == o).unwrap_or_else(|| panic!("{o}"));
    assert!(at("aggr aggr0") < at("vnic app0") && at("vnic web0") < at("interface web0"));
    assert!(at("interface web0") < at("address web0/v4"), "{config:?}");
    assert!(at("etherstub stub0") < at("vnic s0"), "{config:?}");
    let rings = steps(&plan, "rings");
    let ports: Vec<&str> = rings.iter().map(|s| s["object"].as_str().unwrap()).collect();
    assert_eq!(ports, ["port i40e0", "port atl1c0", "port atl1c1"], "{plan}");
    assert!(cost(&plan, "rings_started") > 0 && cost(&plan, "rings_stopped") == 0);
    assert_eq!(steps(&plan, "persist").len(), 1);
    assert_eq!(show_config(&bus), empty, "a dry run changed the configuration");
    assert!(json(&bus, &["show-vnic"]).as_array().unwrap().is_empty());
    assert!(!state.join("links.toml").exists(), "a dry run wrote links.toml");

    // The operation: one history entry, everything there, one save.
    let r = apply(&bus, &["-f", f]);
    assert_eq!(r["changed"], true, "{r}");
    let phases: Vec<&str> = r["result"]["timing"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(phases.contains(&"verify") && phases.contains(&"persist"), "{phases:?}");
    let vnics = json(&bus, &["show-vnic"]);
    assert_eq!(vnics.as_array().unwrap().len(), 5, "{vnics}");
    assert_eq!(json(&bus, &["show-etherstub"]).as_array().unwrap().len(), 1);
    let maxbw = text(&bus, &["show-linkprop", "-c", "-o", "value", "-p", "maxbw,priority", "q0"]);
    assert_eq!(maxbw, "100\nlow\n", "maxbw and priority as applied");
    assert_eq!(rows(&json(&bus, &["show-link"]), "link", "web0")[0]["mtu"], 1400);
    assert_eq!(json(&bus, &["show-aggr"]).as_array().unwrap().len(), 1);
    assert_eq!(rows(&json(&bus, &["show-addr"]), "addrobj", "web0/v4").len(), 1);
    let history = json(&bus, &["show-history"]);
    let applies: Vec<&Value> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["command"].as_str().unwrap().starts_with("apply"))
        .collect();
    assert_eq!(applies.len(), 1, "{history}");
    let file = std::fs::read_to_string(state.join("links.toml")).unwrap();
    let applied = show_config(&bus);
    assert!(file.ends_with(&applied), "links.toml:\n{file}\nshow-config:\n{applied}");

    // show-config applied back, TOML and JSON: no change, nothing written.
    let back = write(&dir, "back.toml", &applied);
    let mtime = std::fs::metadata(state.join("links.toml")).unwrap().modified().unwrap();
    let r = apply(&bus, &["-f", back.to_str().unwrap()]);
    assert_eq!(r["changed"], false, "{r}");
    assert!(r["plan"].as_array().unwrap().is_empty(), "{r}");
    let js = netadm(&bus, &["--json", "show-config"]);
    let back = write(&dir, "back.json", &String::from_utf8(js.stdout).unwrap());
    assert_eq!(apply(&bus, &["-f", back.to_str().unwrap()])["changed"], false);
    assert_eq!(apply(&bus, &["--dry-run", "-f", back.to_str().unwrap()])["changed"], false);
    let after = std::fs::metadata(state.join("links.toml")).unwrap().modified().unwrap();
    assert_eq!(mtime, after, "a no-op apply wrote links.toml");

    // Flows are planned as every other section is: a flow added with -t
    // (running only) is a step of the plan of the saved configuration,
    // which the apply then removes.
    json(&bus, &["add-flow", "-t", "-l", "web0", "-a", "transport=udp", "tmpflow"]);
    let plan = apply(&bus, &["--dry-run", "-f", back.to_str().unwrap()]);
    let config: Vec<(&str, &str)> = steps(&plan, "config")
        .iter()
        .map(|s| (s["object"].as_str().unwrap(), s["action"].as_str().unwrap()))
        .collect();
    assert_eq!((&plan["changed"], config), (&Value::Bool(true), vec![("flow tmpflow", "delete")]));
    apply(&bus, &["-f", back.to_str().unwrap()]);
    assert!(json(&bus, &["show-flow"]).as_array().unwrap().is_empty());

    // A change: the plan costs what changes (one VNIC goes, aggr0's MTU
    // restarts its members' rings).
    let next = DOC
        .replace("[vnic.db0]\nover = \"i40e0\"\nmac = \"2:8:20:0:0:2\"\nmac_mode = \"fixed\"\n", "")
        .replace("policy = \"L4\"", "policy = \"L4\"\nprops = { mtu = \"6000\" }");
    let next = write(&dir, "next.toml", &next);
    let r = apply(&bus, &["-f", next.to_str().unwrap()]);
    let config: Vec<(&str, &str)> = steps(&r, "config")
        .iter()
        .map(|s| (s["object"].as_str().unwrap(), s["action"].as_str().unwrap()))
        .collect();
    assert_eq!(config, [("vnic db0", "delete"), ("aggr aggr0", "modify")], "{r}");
    assert!(cost(&r, "rings_restarted") > 0, "{r}");
    assert_eq!(rows(&json(&bus, &["show-link"]), "link", "aggr0")[0]["mtu"], 6000);
    assert!(rows(&json(&bus, &["show-vnic"]), "link", "db0").is_empty());
    // The human form names each step and its cost.
    let out = netadm(&bus, &["apply", "--dry-run", "-f", f]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("plan (dry run, nothing changed):"), "{text}");
    assert!(text.contains("config  vnic db0") && text.contains("rings restarted"), "{text}");

    // Bad documents: refused before anything changes, naming file, line
    // and key, with the kind of what was wrong.
    let before = show_config(&bus);
    let file_before = std::fs::read(state.join("links.toml")).unwrap();
    let bad = |name: &str, text: String, kind: &str, line: usize, key: &str| {
        let p = write(&dir, name, &text);
        let (k, m) = apply_err(&bus, &["-f", p.to_str().unwrap()]);
        assert_eq!(k, kind, "{name}: {m}");
        let want = format!("{}: line {line}, key {key}: ", p.display());
        assert!(m.starts_with(&want), "{name}: {m:?} does not start with {want:?}");
        // Dry runs refuse it the same way.
        let (k2, m2) = apply_err(&bus, &["--dry-run", "-f", p.to_str().unwrap()]);
        assert_eq!((k2, m2), (k, m));
    };
    bad(
        "unknown.toml",
        DOC.replace(
            "over = \"i40e0\"\nmac = \"2:8:20:0:0:2\"",
            "over = \"i40e0\"\nspeed = 1\nmac = \"2:8:20:0:0:2\"",
        ),
        "InvalidArgument",
        15,
        "vnic.db0.speed",
    );
    bad(
        "type.toml",
        DOC.replace("vid = 12", "vid = \"twelve\""),
        "InvalidArgument",
        22,
        "vnic.app0.vid",
    );
    bad(
        "missing.toml",
        DOC.replace("over = \"aggr0\"", "over = \"aggr9\""),
        "NotFound",
        19,
        "vnic.app0.over",
    );
    bad(
        "itself.toml",
        DOC.replace("over = \"aggr0\"", "over = \"app0\""),
        "InvalidArgument",
        19,
        "vnic.app0.over",
    );
    bad(
        "port.toml",
        DOC.replace("[\"atl1c0\", \"atl1c1\"]", "[\"atl1c0\", \"nope7\"]"),
        "NotFound",
        4,
        "aggr.aggr0.ports",
    );
    bad(
        "prop.toml",
        DOC.replace("mtu = \"1400\"", "mtu = \"99999\""),
        "InvalidValue",
        11,
        "vnic.web0.props.mtu",
    );
    bad(
        "propname.toml",
        DOC.replace("mtu = \"1400\"", "color = \"red\""),
        "InvalidArgument",
        11,
        "vnic.web0.props.color",
    );
    bad(
        "addr.toml",
        DOC.replace("[address.\"web0/v4\"]", "[address.\"db0/v4\"]"),
        "NotFound",
        26,
        "address.\"db0/v4\"",
    );
    // What the verbs refuse, a document cannot do either.
    let end = DOC.lines().count();
    bad(
        "ifstub.toml",
        format!("{DOC}\n[interface.stub0]\n"),
        "InvalidArgument",
        end + 2,
        "interface.stub0",
    );
    bad(
        "ifprop.toml",
        DOC.replace("[interface.web0]", "[interface.web0]\nprops = { \"ipv4.colour\" = \"on\" }"),
        "InvalidArgument",
        25,
        "interface.web0.props.\"ipv4.colour\"",
    );
    bad(
        "dupaddr.toml",
        format!("{DOC}\n[interface.db0]\n\n[address.\"db0/v4\"]\naddr = \"192.0.2.10/24\"\n"),
        "Exists",
        end + 4,
        "address.\"db0/v4\"",
    );
    bad(
        "proto.toml",
        format!("{DOC}\n[proto]\n\"ipv4.colour\" = \"1\"\n"),
        "InvalidArgument",
        end + 3,
        "proto.\"ipv4.colour\"",
    );
    bad(
        "vlanstub.toml",
        format!(
            "{DOC}\n[vnic.v9]\nover = \"stub0\"\nmac = \"2:8:20:0:0:9\"\nmac_mode = \"fixed\"\nvid = 9\nvlan = true\n"
        ),
        "InvalidArgument",
        end + 3,
        "vnic.v9.over",
    );
    bad(
        "macunder.toml",
        DOC.replace("mac = \"2:8:20:0:0:1\"", "mac = \"2:8:20:0:0:9\""),
        "Busy",
        9,
        "vnic.web0.mac",
    );
    let json_doc = String::from_utf8(netadm(&bus, &["--json", "show-config"]).stdout).unwrap();
    bad(
        "unknown.json",
        json_doc.replacen("\"over\"", "\"ovr\"", 1),
        "InvalidArgument",
        json_line(&json_doc, "\"over\""),
        "vnic.app0.ovr",
    );
    assert_eq!(show_config(&bus), before);
    assert_eq!(std::fs::read(state.join("links.toml")).unwrap(), file_before);
    drop(d);
}

/// The 1-based line of the first occurrence of `needle`.
fn json_line(text: &str, needle: &str) -> usize {
    text[..text.find(needle).unwrap()].matches('\n').count() + 1
}

#[test]
fn commit_confirmed_rolls_back_unless_confirmed_also_across_a_restart() {
    let bus = Bus::start();
    let state = bus.subdir("state");
    let mut d = Daemon::start(&bus, &state, &[]);
    let dir = bus.subdir("docs");
    let one = write(&dir, "one.toml", DOC);
    assert_eq!(apply(&bus, &["-f", one.to_str().unwrap()])["changed"], true);
    let before = show_config(&bus);
    let two = write(&dir, "two.toml", &DOC.replace("[interface.web0]", "[vnic.extra0]\nover = \"i40e1\"\nmac = \"2:8:20:0:0:9\"\nmac_mode = \"fixed\"\n\n[interface.web0]"));
    let two = two.to_str().unwrap();
    let checkpoint = state.join("links.checkpoint.toml");

    // rollback: now.
    let r = apply(&bus, &["--confirm-timeout", "600", "-f", two]);
    assert!(r["confirm_deadline_ms"].as_u64().unwrap() > now_ms(), "{r}");
    assert!(checkpoint.exists(), "the checkpoint is not on disk");
    assert_ne!(show_config(&bus), before);
    // A second checkpoint while one is armed is refused.
    let (k, m) = apply_err(&bus, &["--confirm-timeout", "600", "-f", one.to_str().unwrap()]);
    assert_eq!(k, "Busy", "{m}");
    json(&bus, &["rollback"]);
    assert_eq!(show_config(&bus), before);
    assert!(!checkpoint.exists());
    assert_eq!(json_err(&bus, &["rollback"]).0, "NotFound");
    assert_eq!(json_err(&bus, &["confirm"]).0, "NotFound");

    // confirm: kept.
    apply(&bus, &["--confirm-timeout", "600", "-f", two]);
    json(&bus, &["confirm"]);
    assert!(!checkpoint.exists());
    let confirmed = show_config(&bus);
    assert!(confirmed.contains("extra0"));
    apply(&bus, &["-f", one.to_str().unwrap()]);
    assert_eq!(show_config(&bus), before);

    // No confirm: netadmd rolls back by itself (the CLI has long exited).
    let r = apply(&bus, &["--confirm-timeout", "1", "-f", two]);
    let deadline = r["confirm_deadline_ms"].as_u64().unwrap();
    wait_for("netadmd to roll back by itself", || show_config(&bus) == before);
    assert!(now_ms() >= deadline, "rolled back before the deadline");
    wait_for("the checkpoint to go", || !checkpoint.exists());
    assert!(std::fs::read_to_string(state.join("links.toml")).unwrap().ends_with(&before));

    // netadmd killed inside the window: the next one honours the
    // checkpoint (the change is there until the deadline, then goes).
    apply(&bus, &["--confirm-timeout", "4", "-f", two]);
    d.kill9();
    d = Daemon::start(&bus, &state, &[]);
    wait_for("the restarted netadmd to roll back", || show_config(&bus) == before);
    wait_for("the checkpoint to go", || !checkpoint.exists());

    // Stopped past the deadline: rolled back at once when it starts.
    let r = apply(&bus, &["--confirm-timeout", "1", "-f", two]);
    let deadline = r["confirm_deadline_ms"].as_u64().unwrap();
    d.stop();
    assert!(checkpoint.exists(), "a clean stop must keep the checkpoint");
    wait_for("the deadline to pass", || now_ms() > deadline);
    let _d = Daemon::start(&bus, &state, &[]);
    wait_for("the started netadmd to roll back", || show_config(&bus) == before);
    assert!(!checkpoint.exists());
}

#[test]
fn kernel_changes_are_read_back_and_a_failing_step_is_driven_back_entirely() {
    let Some([ns]) = namespaces(&[], "na", [""]) else { return };
    let name = ns.name().to_owned();
    let bus = Bus::start();
    let state = bus.subdir("state");
    // The embedded default hardware, the kernel mirror on.
    let _daemon = Daemon::builder(&bus, &state).netns(&name).start();
    let dir = bus.subdir("docs");
    let one = write(&dir, "one.toml", DOC);
    let r = apply(&bus, &["-f", one.to_str().unwrap()]);
    let kernel: Vec<&str> =
        steps(&r, "kernel").iter().map(|s| s["object"].as_str().unwrap()).collect();
    assert_eq!(kernel, ["interface web0", "address web0/v4"], "{r}");
    assert_eq!(cost(&r, "kernel_changes"), 2);
    let link = ip(&name, &["-o", "link", "show", "web0"]);
    assert!(link.contains("mtu 1400") && link.contains("UP"), "{link}");
    assert!(ip(&name, &["-o", "addr", "show", "web0"]).contains("192.0.2.10/24"));
    let before = show_config(&bus);

    // A name the kernel refuses (16 bytes; a link name may have 31):
    // refused before anything changes.
    let long = DOC.replace("[interface.web0]", "[vnic.web01234567890123]\nover = \"i40e1\"\nmac = \"2:8:20:0:0:8\"\nmac_mode = \"fixed\"\n\n[interface.web0]");
    let p = write(&dir, "long.toml", &long);
    let (k, m) = apply_err(&bus, &["-f", p.to_str().unwrap()]);
    assert_eq!(k, "InvalidName", "{m}");
    assert!(m.contains("line 24, key vnic.web01234567890123:"), "{m}");

    // Something in the kernel already has a name the document wants: the
    // kernel step fails part way; the rings (i40e1 started for the new
    // VNICs) and the TAPs already made are put back, and the step named.
    ip(&name, &["link", "add", "blk0", "type", "veth", "peer", "name", "blk1"]);
    let more = DOC.replace(
        "[interface.web0]",
        "[vnic.new0]\nover = \"i40e1\"\nmac = \"2:8:20:0:0:7\"\nmac_mode = \"fixed\"\n\n\
         [vnic.blk0]\nover = \"i40e1\"\nmac = \"2:8:20:0:0:6\"\nmac_mode = \"fixed\"\n\n\
         [interface.new0]\n\n[interface.blk0]\n\n[address.\"new0/v4\"]\naddr = \"198.51.100.1/24\"\n\n[interface.web0]",
    );
    let p = write(&dir, "more.toml", &more);
    let plan = apply(&bus, &["--dry-run", "-f", p.to_str().unwrap()]);
    assert!(cost(&plan, "rings_started") > 0, "{plan}");
    let (k, m) = apply_err(&bus, &["-f", p.to_str().unwrap()]);
    assert_eq!(k, "Exists", "{m}");
    assert!(m.contains("(kernel interface blk0: make a TAP device"), "{m}");
    assert!(m.contains("everything was put back"), "{m}");
    assert_eq!(show_config(&bus), before);
    assert!(ip(&name, &["-o", "link", "show"]).lines().all(|l| !l.contains("new0")));
    let links = json(&bus, &["show-link"]);
    assert!(rows(&links, "link", "new0").is_empty(), "{links}");
    // i40e1 carries nothing: its rings are stopped again.
    let i40e1 = rows(&json(&bus, &["show-phys"]), "link", "i40e1")[0].clone();
    assert_eq!(i40e1["rings_started"], 0, "{i40e1}");
    assert!(ip(&name, &["-o", "addr", "show", "web0"]).contains("192.0.2.10/24"));
}
