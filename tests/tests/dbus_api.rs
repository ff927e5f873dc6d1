//! The documented D-Bus API (`docs/dbus/org.netadm.Netadm1.xml`, explained
//! in `docs/DBUS.md`) is the one the running daemon serves: every method,
//! argument, signal and property, with its name, type and direction, read
//! back by an outside client (busctl) from a real netadmd on a real bus.
//! Every method that takes arguments is called with arguments naming
//! nothing that exists, through dbus-send: each must answer with a typed
//! error that the document lists for that method.

use std::collections::BTreeMap;
use std::process::Command;

use netadm_testkit::*;

/// What the documented interfaces' errors are called by.
const ERRORS: &str = "org.netadm.Netadm1.Errors";
const ERROR_PREFIX: &str = "org.netadm.Netadm1.Error.";

fn parse(xml: &str) -> roxmltree::Document<'_> {
    let opt = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    roxmltree::Document::parse_with_options(xml, opt)
        .unwrap_or_else(|e| panic!("not XML ({e}):\n{xml}"))
}

/// The `<interface>` element named `iface`.
fn interface<'a, 'x>(doc: &'a roxmltree::Document<'x>, iface: &str) -> roxmltree::Node<'a, 'x> {
    doc.descendants()
        .find(|n| n.has_tag_name("interface") && n.attribute("name") == Some(iface))
        .unwrap_or_else(|| panic!("no interface {iface} in:\n{}", doc.input_text()))
}

/// A member of an interface as the bus sees it: kind and name, then its
/// arguments (name, type, direction) or its property type and access.
type Members = BTreeMap<(String, String), Vec<(String, String, String)>>;

/// The members of interface `iface` in introspection XML `xml`; comments
/// and annotations (the documentation) are not part of the contract.
fn members(xml: &str, iface: &str) -> Members {
    let doc = parse(xml);
    let node = interface(&doc, iface);
    let attr = |n: roxmltree::Node, a: &str| n.attribute(a).unwrap_or("").to_owned();
    node.children()
        .filter(|m| m.is_element() && !m.has_tag_name("annotation"))
        .map(|m| {
            let key = (m.tag_name().name().to_owned(), attr(m, "name"));
            let args = if m.has_tag_name("property") {
                vec![(String::new(), attr(m, "type"), attr(m, "access"))]
            } else {
                m.children()
                    .filter(|a| a.has_tag_name("arg"))
                    .map(|a| (attr(a, "name"), attr(a, "type"), attr(a, "direction")))
                    .collect()
            };
            (key, args)
        })
        .collect()
}

/// The documented errors of each method of `iface` (its `ERRORS`
/// annotation, space-separated short names).
fn documented_errors(xml: &str, iface: &str) -> BTreeMap<String, Vec<String>> {
    let doc = parse(xml);
    let node = interface(&doc, iface);
    node.children()
        .filter(|m| m.has_tag_name("method"))
        .map(|m| {
            let errors = m
                .children()
                .find(|a| a.has_tag_name("annotation") && a.attribute("name") == Some(ERRORS))
                .and_then(|a| a.attribute("value"))
                .unwrap_or("");
            let name = m.attribute("name").unwrap().to_owned();
            (name, errors.split_whitespace().map(str::to_owned).collect())
        })
        .collect()
}

/// Explains a difference between the document and the daemon.
fn diff(iface: &str, doc: &Members, live: &Members) -> Vec<String> {
    let mut out = vec![];
    for (k, v) in live {
        match doc.get(k) {
            None => {
                out.push(format!("{iface}: {} {} is served but not documented: {v:?}", k.0, k.1))
            }
            Some(d) if d != v => {
                out.push(format!("{iface}: {} {}: documented {d:?}, served {v:?}", k.0, k.1))
            }
            Some(_) => {}
        }
    }
    for k in doc.keys().filter(|k| !live.contains_key(*k)) {
        out.push(format!("{iface}: {} {} is documented but not served", k.0, k.1));
    }
    out
}

/// A dbus-send argument of D-Bus type `sig` naming nothing that exists.
fn bogus(sig: &str) -> String {
    match sig {
        "s" => "string:nosuch0".into(),
        "b" => "boolean:true".into(),
        "q" => "uint16:0".into(),
        "u" => "uint32:0".into(),
        "t" => "uint64:0".into(),
        "as" => "array:string:nosuch0".into(),
        "a{ss}" => "dict:string:string:nosuchprop,1".into(),
        other => panic!("no bogus value for D-Bus type {other}: extend bogus()"),
    }
}

fn introspect(bus: &Bus, path: &str) -> String {
    let out = Command::new("busctl")
        .args(["--address", bus.address(), "introspect", "--xml-interface"])
        .args(["org.netadm.Netadm1", path])
        .output()
        .unwrap();
    assert!(out.status.success(), "busctl introspect: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_documented_dbus_api_is_the_one_served() {
    if !prerequisites(None, &[("busctl", "systemd"), ("dbus-send", "dbus-bin")]) {
        return;
    }
    let documented = std::fs::read_to_string(repo_root().join("docs/dbus/org.netadm.Netadm1.xml"))
        .expect("docs/dbus/org.netadm.Netadm1.xml");
    let bus = Bus::start();
    let state = bus.subdir("state");
    let _d = Daemon::start(&bus, &state, &[]);

    let manager = introspect(&bus, "/org/netadm/Netadm1");
    let link = introspect(&bus, "/org/netadm/Netadm1/links/i40e0");
    let mut wrong = diff(
        "org.netadm.Netadm1",
        &members(&documented, "org.netadm.Netadm1"),
        &members(&manager, "org.netadm.Netadm1"),
    );
    wrong.extend(diff(
        "org.netadm.Netadm1.Link",
        &members(&documented, "org.netadm.Netadm1.Link"),
        &members(&link, "org.netadm.Netadm1.Link"),
    ));
    assert!(
        wrong.is_empty(),
        "docs/dbus/org.netadm.Netadm1.xml is out of date:\n{}",
        wrong.join("\n")
    );

    // Every documented method lists its errors, each an error netadmd has.
    let errors = documented_errors(&documented, "org.netadm.Netadm1");
    let known = [
        "NotFound",
        "Exists",
        "InvalidName",
        "InvalidArgument",
        "InvalidValue",
        "NotSupported",
        "Busy",
        "AccessDenied",
        "Hardware",
        "Persistence",
        "Internal",
    ];
    for (method, list) in &errors {
        assert!(!list.is_empty(), "{method}: no {ERRORS} annotation");
        for e in list {
            assert!(known.contains(&e.as_str()), "{method}: {e} is no error of netadmd's");
        }
    }
    let docs_md = std::fs::read_to_string(repo_root().join("docs/DBUS.md")).expect("docs/DBUS.md");
    for e in known {
        assert!(
            docs_md.contains(&format!("{ERROR_PREFIX}{e}")),
            "docs/DBUS.md does not explain {e}"
        );
    }

    // Called with what names nothing, each method answers with a typed
    // error it documents, and changes nothing.
    let before = json(&bus, &["show-link"]);
    for ((kind, method), args) in members(&manager, "org.netadm.Netadm1") {
        let ins: Vec<&(String, String, String)> = args.iter().filter(|a| a.2 == "in").collect();
        if kind != "method" || ins.is_empty() {
            continue;
        }
        let out = Command::new("dbus-send")
            .args(["--print-reply", &format!("--bus={}", bus.address())])
            .args(["--dest=org.netadm.Netadm1", "/org/netadm/Netadm1"])
            .arg(format!("org.netadm.Netadm1.{method}"))
            // Any free name makes an etherstub: give it a name that is none.
            .args(ins.iter().map(|a| match (method.as_str(), a.1.as_str()) {
                ("CreateEtherstub", "s") => "string:bad name".to_owned(),
                (_, sig) => bogus(sig),
            }))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{method} with bogus arguments succeeded");
        let name = said
            .split_whitespace()
            .find_map(|w| w.strip_prefix(ERROR_PREFIX))
            .map(|n| n.trim_end_matches(':'))
            .unwrap_or_else(|| panic!("{method}: not a typed error: {said}"));
        eprintln!("{method}: {name}");
        assert!(
            errors[&method].iter().any(|e| e == name),
            "{method} answered {name}, which its documentation does not list: {said}"
        );
    }
    assert_eq!(json(&bus, &["show-link"]), before, "a refused call changed the links");
}

/// The released XML files (`docs/dbus/releases/org.netadm.Netadm1-VERSION.xml`),
/// by version.
fn releases() -> BTreeMap<String, String> {
    let dir = repo_root().join("docs/dbus/releases");
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&dir).expect("docs/dbus/releases") {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let Some(version) =
            name.strip_prefix("org.netadm.Netadm1-").and_then(|n| n.strip_suffix(".xml"))
        else {
            continue;
        };
        out.insert(version.to_owned(), std::fs::read_to_string(&path).unwrap());
    }
    out
}

/// What `served` broke of release `release`'s members of `iface`: a
/// member that is no longer served, or served with other arguments,
/// types, directions or access. Members the release did not have are
/// additions, which are allowed.
fn broken(release: &str, iface: &str, released: &Members, served: &Members) -> Vec<String> {
    released
        .iter()
        .filter_map(|(k, v)| match served.get(k) {
            None => Some(format!("{release}: {iface} {} {} is no longer served", k.0, k.1)),
            Some(s) if s != v => Some(format!(
                "{release}: {iface} {} {} was released as {v:?}, is served as {s:?}",
                k.0, k.1
            )),
            Some(_) => None,
        })
        .collect()
}

#[test]
fn no_released_member_changed_or_disappeared() {
    if !prerequisites(None, &[("busctl", "systemd")]) {
        return;
    }
    let releases = releases();
    assert!(releases.contains_key("0.1.0"), "the first published XML (0.1.0) is kept");
    // Every version is kept: this one's XML is there, and is what it serves.
    let version = env!("CARGO_PKG_VERSION");
    let this = releases.get(version).unwrap_or_else(|| {
        panic!(
            "no docs/dbus/releases/org.netadm.Netadm1-{version}.xml: a release keeps its XML \
             (copy docs/dbus/org.netadm.Netadm1.xml there)"
        )
    });

    let bus = Bus::start();
    let state = bus.subdir("state");
    let _d = Daemon::start(&bus, &state, &[]);
    let served = [
        ("org.netadm.Netadm1", introspect(&bus, "/org/netadm/Netadm1")),
        ("org.netadm.Netadm1.Link", introspect(&bus, "/org/netadm/Netadm1/links/i40e0")),
    ];
    let mut wrong = vec![];
    for (release, xml) in &releases {
        for (iface, live) in &served {
            wrong.extend(broken(release, iface, &members(xml, iface), &members(live, iface)));
        }
    }
    for (iface, live) in &served {
        let (doc, live) = (members(this, iface), members(live, iface));
        wrong.extend(diff(&format!("{version} (this version)"), &doc, &live));
    }
    assert!(wrong.is_empty(), "the D-Bus contract is broken:\n{}", wrong.join("\n"));

    // The check itself: it sees a member changed in place and one gone,
    // and lets an addition through.
    let first = members(&releases["0.1.0"], "org.netadm.Netadm1");
    let key = ("method".to_owned(), "ShowIf".to_owned());
    let mut changed = first.clone();
    changed.get_mut(&key).unwrap()[0].1 = "a(sssssss)".into();
    let seen = broken("0.1.0", "org.netadm.Netadm1", &first, &changed);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("ShowIf was released as"), "{seen:?}");
    let mut gone = first.clone();
    gone.remove(&key);
    assert_eq!(broken("0.1.0", "i", &first, &gone).len(), 1);
    let mut added = first.clone();
    added.insert(("method".into(), "ShowNew".into()), vec![]);
    assert!(broken("0.1.0", "i", &first, &added).is_empty());
}
