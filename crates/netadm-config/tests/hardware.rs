//! Hardware configuration: the shipped default, parse errors with positions,
//! and every validation failure.

use std::path::Path;

use netadm_config::{
    ConfigError, EMBEDDED_DEFAULT, HardwareConfig, HardwareError, PortClass, Wire,
};
use netadm_model::LinkName;

fn name(s: &str) -> LinkName {
    s.parse().unwrap()
}

fn parse(text: &str) -> Result<HardwareConfig, ConfigError> {
    HardwareConfig::parse(text, Path::new("/etc/netadm/hw.toml"))
}

/// The validation error of `text`, which must parse.
fn invalid(text: &str) -> HardwareError {
    match parse(text) {
        Err(ConfigError::Invalid { path, error }) => {
            assert_eq!(path, Path::new("/etc/netadm/hw.toml"));
            error
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
}

/// The (line, column, message) of a parse error of `text`.
fn parse_error(text: &str) -> (usize, usize, String) {
    match parse(text) {
        Err(e @ ConfigError::Parse { .. }) => {
            let shown = e.to_string();
            let ConfigError::Parse { path, line, column, message, source_line } = e else {
                unreachable!()
            };
            assert_eq!(path, Path::new("/etc/netadm/hw.toml"));
            assert_eq!(source_line, text.lines().nth(line - 1).unwrap());
            assert!(
                shown.starts_with(&format!("/etc/netadm/hw.toml:{line}:{column}: {message}")),
                "{shown}"
            );
            assert!(shown.contains(&source_line), "{shown}");
            (line, column, message)
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

const I40E: &str = "[[port]]\nname = \"i40e0\"\nclass = \"i40e\"\nwire = { kind = \"sink\" }\n";

#[test]
fn embedded_default_has_six_ports_and_mutual_cables() {
    let config = HardwareConfig::embedded_default();
    assert_eq!(HardwareConfig::parse(EMBEDDED_DEFAULT, Path::new("x")).unwrap(), config);
    assert_eq!(config.ports.len(), 6);
    for i40e in ["i40e0", "i40e1"] {
        let p = config.port(i40e).unwrap();
        assert_eq!(p.class, PortClass::I40e);
        assert_eq!(p.queue_pairs_or_default(), Some(256));
        assert_eq!(p.vectors_or_default(), Some(8));
        assert_eq!(p.wire, Some(Wire::Reflector));
    }
    for (a, b) in [("atl1c0", "atl1c2"), ("atl1c1", "atl1c3")] {
        let (pa, pb) = (config.port(a).unwrap(), config.port(b).unwrap());
        assert_eq!(pa.class, PortClass::Atl1c);
        assert_eq!(pa.queue_pairs_or_default(), None);
        assert_eq!(pa.wire, Some(Wire::Cable { peer: name(b) }));
        assert_eq!(pb.wire, Some(Wire::Cable { peer: name(a) }));
    }
}

#[test]
fn every_wire_kind_and_defaults() {
    let text = r#"
[[port]]
name = "i40e0"
class = "i40e"
ring_size = 512
wire = { kind = "sink" }
[[port]]
name = "i40e1"
class = "i40e"
queue_pairs = 384
vectors = 64
ring_size = 4096
wire = { kind = "afpacket", interface = "veth-netadm0" }
[[port]]
name = "atl1c0"
class = "atl1c"
ring_size = 64
wire = { kind = "reflector" }
"#;
    let c = parse(text).unwrap();
    assert_eq!(c.ports[0].queue_pairs_or_default(), Some(256));
    assert_eq!(c.ports[0].ring_size, Some(512));
    assert_eq!(c.ports[1].queue_pairs_or_default(), Some(384));
    assert_eq!(c.ports[1].vectors_or_default(), Some(64));
    assert_eq!(c.ports[1].wire, Some(Wire::Afpacket { interface: "veth-netadm0".into() }));
    assert_eq!(c.ports[2].wire.as_ref().map(Wire::kind), Some("reflector"));
    // Serializing gives back an equal configuration.
    let again = toml::to_string(&c).unwrap();
    assert_eq!(parse(&again).unwrap(), c);
}

#[test]
fn no_ports() {
    assert_eq!(invalid(""), HardwareError::NoPorts);
    assert_eq!(invalid("# only a comment\n"), HardwareError::NoPorts);
}

#[test]
fn duplicate_names() {
    assert_eq!(
        invalid(&format!("{I40E}{I40E}")),
        HardwareError::DuplicateName { name: name("i40e0") }
    );
}

#[test]
fn i40e_ranges() {
    let with = |field: &str| I40E.replace("wire =", &format!("{field}\nwire ="));
    let port = || name("i40e0");
    for (field, error) in [
        ("queue_pairs = 0", HardwareError::QueuePairs { port: port(), value: 0 }),
        ("queue_pairs = 385", HardwareError::QueuePairs { port: port(), value: 385 }),
        ("vectors = 0", HardwareError::Vectors { port: port(), value: 0 }),
        ("vectors = 65", HardwareError::Vectors { port: port(), value: 65 }),
    ] {
        assert_eq!(invalid(&with(field)), error);
    }
    parse(&with("queue_pairs = 1\nvectors = 1")).unwrap();
    // Beyond u16 is a type error with a position, not a validation error.
    let (line, _, msg) = parse_error(&with("queue_pairs = 70000"));
    assert_eq!(line, 4);
    assert!(msg.contains("70000"), "{msg}");
    let (line, _, _) = parse_error(&with("vectors = -1"));
    assert_eq!(line, 4);
}

#[test]
fn atl1c_has_fixed_queues() {
    let atl = "[[port]]\nname = \"atl1c0\"\nclass = \"atl1c\"\nwire = { kind = \"sink\" }\n";
    parse(atl).unwrap();
    for field in ["queue_pairs", "vectors"] {
        let text = atl.replace("wire =", &format!("{field} = 4\nwire ="));
        let e = invalid(&text);
        assert_eq!(e, HardwareError::Atl1cFixedQueues { port: name("atl1c0"), field });
        assert!(e.to_string().contains("fixed 4 TX + 1 RX queues"), "{e}");
    }
}

#[test]
fn ring_size_is_a_power_of_two_in_range() {
    for ok in [64, 128, 1024, 4096] {
        parse(&I40E.replace("wire =", &format!("ring_size = {ok}\nwire ="))).unwrap();
    }
    for bad in [0, 32, 100, 8192, 3000] {
        let text = I40E.replace("wire =", &format!("ring_size = {bad}\nwire ="));
        assert_eq!(invalid(&text), HardwareError::RingSize { port: name("i40e0"), value: bad });
    }
}

#[test]
fn speed_defaults_per_class_and_is_checked() {
    let c = HardwareConfig::embedded_default();
    assert_eq!(c.port("i40e0").unwrap().speed_or_default(), 40_000);
    assert_eq!(c.port("atl1c0").unwrap().speed_or_default(), 1_000);
    let atl = I40E.replace("i40e0", "atl1c0").replace("\"i40e\"", "\"atl1c\"");
    for ok in [10, 100, 1_000, 2_500, 25_000, 400_000] {
        let c = parse(&atl.replace("wire =", &format!("speed = {ok}\nwire ="))).unwrap();
        assert_eq!(c.ports[0].speed, Some(ok));
        assert_eq!(c.ports[0].speed_or_default(), ok);
    }
    for bad in [0, 9, 400_001, 1_000_000_000] {
        let text = I40E.replace("wire =", &format!("speed = {bad}\nwire ="));
        let e = invalid(&text);
        assert_eq!(e, HardwareError::Speed { port: name("i40e0"), value: bad });
        let shown = e.to_string();
        assert!(shown.contains("i40e0") && shown.contains("10..=400000"), "{shown}");
    }
    // Not a number: a parse error that names the line.
    let (line, _, message) = parse_error(&I40E.replace("wire =", "speed = \"fast\"\nwire ="));
    assert_eq!(line, 4, "{message}");
    let (_, _, message) = parse_error(&I40E.replace("wire =", "speed = -1\nwire ="));
    assert!(!message.is_empty());
}

#[test]
fn a_cables_ends_run_at_one_speed() {
    let both = |a: &str, b: &str| {
        cabled("atl1c1", r#"{ kind = "cable", peer = "atl1c0" }"#)
            .replacen("wire =", &format!("{a}wire ="), 1)
            .replacen("class = \"atl1c\"\nwire = {", &format!("class = \"atl1c\"\n{b}wire = {{"), 1)
    };
    parse(&both("speed = 100\n", "speed = 100\n")).unwrap();
    parse(&both("speed = 1000\n", "")).unwrap();
    let e = invalid(&both("speed = 100\n", ""));
    assert_eq!(
        e,
        HardwareError::CableSpeedMismatch {
            port: name("atl1c0"),
            speed: 100,
            peer: name("atl1c1"),
            peer_speed: 1000
        }
    );
    assert!(e.to_string().contains("a cable's ends need the same `speed`"), "{e}");
}

fn cabled(a_peer: &str, b_wire: &str) -> String {
    format!(
        "[[port]]\nname = \"atl1c0\"\nclass = \"atl1c\"\nwire = {{ kind = \"cable\", peer = \"{a_peer}\" }}\n\
         [[port]]\nname = \"atl1c1\"\nclass = \"atl1c\"\nwire = {b_wire}\n"
    )
}

#[test]
fn cables_must_be_mutual() {
    parse(&cabled("atl1c1", r#"{ kind = "cable", peer = "atl1c0" }"#)).unwrap();
    assert_eq!(
        invalid(&cabled("atl1c7", r#"{ kind = "sink" }"#)),
        HardwareError::CablePeerMissing { port: name("atl1c0"), peer: name("atl1c7") }
    );
    assert_eq!(
        invalid(&cabled("atl1c0", r#"{ kind = "sink" }"#)),
        HardwareError::CableToSelf { port: name("atl1c0") }
    );
    let e = invalid(&cabled("atl1c1", r#"{ kind = "reflector" }"#));
    assert_eq!(
        e,
        HardwareError::CableNotMutual {
            port: name("atl1c0"),
            peer: name("atl1c1"),
            peer_wire: "reflector".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "port atl1c0: cabled to atl1c1, but atl1c1's wire is reflector, not a cable to atl1c0"
    );
    // atl1c1 cables to a third port: atl1c0's cable is not returned.
    let three = format!(
        "{}[[port]]\nname = \"atl1c2\"\nclass = \"atl1c\"\nwire = {{ kind = \"cable\", peer = \"atl1c1\" }}\n",
        cabled("atl1c1", r#"{ kind = "cable", peer = "atl1c2" }"#)
    );
    assert!(matches!(
        invalid(&three),
        HardwareError::CableNotMutual { ref port, ref peer_wire, .. }
            if port.as_str() == "atl1c0" && peer_wire == "cable to atl1c2"
    ));
}

#[test]
fn afpacket_interface_names() {
    let with = |ifname: &str| {
        I40E.replace(
            r#"{ kind = "sink" }"#,
            &format!(r#"{{ kind = "afpacket", interface = "{ifname}" }}"#),
        )
    };
    parse(&with("eth0")).unwrap();
    parse(&with("abcdefghijklmno")).unwrap();
    for bad in ["", "abcdefghijklmnop", ".", "..", "a/b", "a b", "a:b"] {
        match invalid(&with(bad)) {
            HardwareError::AfpacketInterface { port, interface, .. } => {
                assert_eq!((port.as_str(), interface.as_str()), ("i40e0", bad));
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

#[test]
fn wire_fields_must_match_the_kind() {
    let with = |wire: &str| I40E.replace(r#"{ kind = "sink" }"#, wire);
    for (wire, want) in [
        (r#"{ kind = "reflector", peer = "i40e1" }"#, r#"wire kind "reflector" takes no `peer`"#),
        (r#"{ kind = "sink", interface = "eth0" }"#, r#"wire kind "sink" takes no `interface`"#),
        (r#"{ kind = "cable" }"#, r#"wire kind "cable" needs `peer`"#),
        (r#"{ kind = "afpacket" }"#, r#"wire kind "afpacket" needs `interface`"#),
        (r#"{ kind = "afpacket", interface = "e0", peer = "i40e1" }"#, "takes no `peer`"),
        (r#"{ kind = "cable", peer = "i40e1", interface = "e0" }"#, "takes no `interface`"),
        (r#"{ kind = "laser" }"#, "unknown variant `laser`"),
        (r#"{ kind = "sink", colour = "red" }"#, "unknown field `colour`"),
        (r#"{ peer = "i40e1" }"#, "missing field `kind`"),
    ] {
        let (line, _, msg) = parse_error(&with(wire));
        assert_eq!(line, 4, "{wire}");
        assert!(msg.contains(want), "{wire}: {msg}");
    }
}

#[test]
fn unknown_field_reports_its_line() {
    let text = format!(
        "{I40E}\n[[port]]\nname = \"i40e1\"\nclass = \"i40e\"\nqueues = 3\nwire = {{ kind = \"sink\" }}\n"
    );
    let (line, column, msg) = parse_error(&text);
    assert_eq!((line, column), (9, 1));
    assert!(msg.contains("unknown field `queues`"), "{msg}");
    let (line, column, msg) = parse_error("[machine]\n");
    assert_eq!((line, column), (1, 2));
    assert!(msg.contains("unknown field `machine`"), "{msg}");
}

#[test]
fn bad_values_report_their_line() {
    let (line, column, msg) = parse_error(&I40E.replace("\"i40e0\"", "\"i40e-0\""));
    assert_eq!((line, column), (2, 8));
    assert_eq!(
        msg,
        r#"link name "i40e-0": character '-' at position 4 is not allowed (only ASCII letters, digits and '_')"#
    );
    let (line, _, msg) = parse_error(&I40E.replace("\"i40e\"", "\"e1000\""));
    assert_eq!(line, 3);
    assert!(msg.contains("expected one of `i40e`, `atl1c`, `kernel`"), "{msg}");
    let (line, _, msg) = parse_error(&I40E.replace("wire = { kind = \"sink\" }\n", ""));
    assert_eq!(line, 1);
    assert!(msg.contains("missing field `wire`"), "{msg}");
}

#[test]
fn corrupt_toml_names_file_and_line() {
    let (line, _, _) = parse_error(&format!("{I40E}[[port]\nname = \"x0\"\n"));
    assert_eq!(line, 5);
    let (line, _, _) = parse_error("[[port]]\nname = \"i40e0\nclass = \"i40e\"\n");
    assert_eq!(line, 2);
}

#[test]
fn load_reads_files_and_reports_io_errors() {
    let dir = std::env::temp_dir().join(format!("netadm-config-hw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("netadm.toml");
    std::fs::write(&path, EMBEDDED_DEFAULT).unwrap();
    assert_eq!(HardwareConfig::load(&path).unwrap(), HardwareConfig::embedded_default());
    std::fs::write(&path, "[[port]]\nname = \"i40e0\"\nnope = 1\n").unwrap();
    match HardwareConfig::load(&path) {
        Err(ConfigError::Parse { path: p, line: 3, column: 1, .. }) => assert_eq!(p, path),
        other => panic!("{other:?}"),
    }
    std::fs::write(&path, b"[[port]]\nname = \"\xff\"\n").unwrap();
    assert!(matches!(
        HardwareConfig::load(&path),
        Err(ConfigError::Parse { line: 2, column: 9, .. })
    ));
    let missing = dir.join("missing.toml");
    match HardwareConfig::load(&missing) {
        Err(e @ ConfigError::Io { .. }) => assert!(e.to_string().contains("missing.toml"), "{e}"),
        other => panic!("{other:?}"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
