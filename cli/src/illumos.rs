//! `dladm` and `ipadm`: netadm under its illumos names.
//!
//! The one `netadm` binary, started as `dladm` or `ipadm` (a symlink or
//! hard link; `systemd/install.sh` makes them), accepts the illumos
//! spellings of the verbs netadm has and rewrites the command line into
//! netadm's before the usual parsing, so each verb keeps one definition.
//! What differs from `netadm`:
//!
//! - Only that command's verbs: `dladm` the datalink ones, `ipadm` the IP
//!   ones, with illumos's names (`ipadm create-ip`/`delete-ip` as well as
//!   the older `create-if`/`delete-if`) and long options (`--temporary`,
//!   `--link`, `--parsable`, `--output`, ...).
//! - `ipadm create-addr -a local=ADDR/PREFIX` (or `-a ADDR/PREFIX`).
//! - illumos verbs netadm does not have yet (bridges, DHCP, ...)
//!   fail with a `NotSupported` error naming the verb, before any call.
//! - Exit status 1 for every failure, usage errors included (illumos's);
//!   errors print as `dladm: ...`; mutating verbs print nothing on success
//!   (unless `--json`), as illumos's do; `dladm` alone is `dladm show-link`.

use std::path::Path;

use crate::error::CliError;

/// Which command the binary was started as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Personality {
    /// `netadm`: every verb, netadm's conventions.
    Netadm,
    /// `dladm`: the datalink verbs.
    Dladm,
    /// `ipadm`: the IP interface and address verbs.
    Ipadm,
    /// `dlstat`: traffic counters per link (netadm's `dlstat` verb).
    Dlstat,
    /// `flowadm`: the flow verbs.
    Flowadm,
    /// `flowstat`: what each flow carried (netadm's `flowstat` verb).
    Flowstat,
}

/// flowadm verbs netadm has, under the same names.
pub(crate) const FLOWADM: &[&str] =
    &["add-flow", "remove-flow", "show-flow", "set-flowprop", "reset-flowprop", "show-flowprop"];

/// flowadm verbs netadm does not have yet.
pub(crate) const FLOWADM_NOT_YET: &[&str] = &["show-usage"];

/// dladm verbs netadm has, under the same names.
const DLADM: &[&str] = &[
    "show-phys",
    "show-ether",
    "show-link",
    "rename-link",
    "create-aggr",
    "modify-aggr",
    "add-aggr",
    "remove-aggr",
    "delete-aggr",
    "show-aggr",
    "create-vnic",
    "delete-vnic",
    "show-vnic",
    "create-vlan",
    "delete-vlan",
    "show-vlan",
    "create-etherstub",
    "delete-etherstub",
    "show-etherstub",
    "set-linkprop",
    "reset-linkprop",
    "show-linkprop",
];

/// dladm verbs netadm does not have yet.
pub(crate) const DLADM_NOT_YET: &[&str] = &[
    "up-vlan",
    "up-aggr",
    "up-vnic",
    "delete-phys",
    "show-usage",
    "init-linkprop",
    "create-iptun",
    "modify-iptun",
    "delete-iptun",
    "show-iptun",
    "up-iptun",
    "down-iptun",
    "create-bridge",
    "modify-bridge",
    "delete-bridge",
    "add-bridge",
    "remove-bridge",
    "show-bridge",
    "create-simnet",
    "modify-simnet",
    "delete-simnet",
    "show-simnet",
    "up-simnet",
    "create-part",
    "delete-part",
    "show-part",
    "show-ib",
    "create-overlay",
    "modify-overlay",
    "delete-overlay",
    "show-overlay",
    "scan-wifi",
    "connect-wifi",
    "disconnect-wifi",
    "show-wifi",
    "create-secobj",
    "delete-secobj",
    "show-secobj",
    "init-secobj",
];

/// ipadm verbs netadm has: (illumos name, netadm verb).
pub(crate) const IPADM: &[(&str, &str)] = &[
    ("create-ip", "create-if"),
    ("create-if", "create-if"),
    ("delete-ip", "delete-if"),
    ("delete-if", "delete-if"),
    ("show-if", "show-if"),
    ("create-addr", "create-addr"),
    ("delete-addr", "delete-addr"),
    ("show-addr", "show-addr"),
    ("enable-if", "enable-if"),
    ("enable-ip", "enable-if"),
    ("disable-if", "disable-if"),
    ("disable-ip", "disable-if"),
    ("up-addr", "up-addr"),
    ("set-ifprop", "set-ifprop"),
    ("reset-ifprop", "reset-ifprop"),
    ("show-ifprop", "show-ifprop"),
    ("set-addrprop", "set-addrprop"),
    ("reset-addrprop", "reset-addrprop"),
    ("show-addrprop", "show-addrprop"),
    ("set-prop", "set-prop"),
    ("reset-prop", "reset-prop"),
    ("show-prop", "show-prop"),
    ("down-addr", "down-addr"),
];

/// ipadm verbs netadm does not have yet.
pub(crate) const IPADM_NOT_YET: &[&str] = &[
    "enable-addr",
    "disable-addr",
    "refresh-addr",
    "create-ipmp",
    "delete-ipmp",
    "add-ipmp",
    "remove-ipmp",
    "create-vni",
    "delete-vni",
];

/// illumos long options and the short ones netadm spells them with.
/// `--parsable` is `-c` for `show-linkprop` (see [`long_option`]).
pub(crate) const LONG: &[(&str, &str)] = &[
    ("temporary", "-t"),
    ("link", "-l"),
    ("mac-address", "-m"),
    ("vid", "-v"),
    ("prop", "-p"),
    ("parsable", "-p"),
    ("output", "-o"),
    ("policy", "-P"),
    ("lacp-mode", "-L"),
    ("lacp-timer", "-T"),
    ("unicast", "-u"),
    ("statistics", "-s"),
    ("lacp", "-L"),
    ("extended", "-x"),
    // show-phys -m and -L.
    ("mac", "-m"),
    ("loc", "-L"),
    ("type", "-T"),
    ("address", "-a"),
    ("down", "-d"),
    ("release", "-r"),
    ("wait", "-w"),
    ("module", "-m"),
    // flowadm's -a.
    ("attr", "-a"),
];

impl Personality {
    /// The personality named by how the binary was started (`argv[0]`'s
    /// file name).
    pub fn from_argv0(arg0: Option<&str>) -> Self {
        match arg0.and_then(|a| Path::new(a).file_name()).and_then(|n| n.to_str()) {
            Some("dladm") => Self::Dladm,
            Some("ipadm") => Self::Ipadm,
            Some("dlstat") => Self::Dlstat,
            Some("flowadm") => Self::Flowadm,
            Some("flowstat") => Self::Flowstat,
            _ => Self::Netadm,
        }
    }

    /// The command's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Netadm => "netadm",
            Self::Dladm => "dladm",
            Self::Ipadm => "ipadm",
            Self::Dlstat => "dlstat",
            Self::Flowadm => "flowadm",
            Self::Flowstat => "flowstat",
        }
    }

    /// Whether this is one of the illumos commands.
    pub fn is_illumos(self) -> bool {
        self != Self::Netadm
    }

    /// Exit status of a malformed command line: illumos's commands exit 1
    /// for every failure, netadm 2 (clap's).
    pub fn usage_status(self) -> u8 {
        if self.is_illumos() { 1 } else { 2 }
    }

    /// Whether `verb`'s successful output is printed: illumos's mutating
    /// verbs say nothing (scripts read their exit status).
    pub fn prints(self, verb: &str, json: bool) -> bool {
        !self.is_illumos() || json || verb.starts_with("show-") || verb.ends_with("stat")
    }

    /// Rewrites the command line `args` (`args[0]` the program) into
    /// netadm's; refuses verbs this command does not have (yet).
    pub fn translate(self, mut args: Vec<String>) -> Result<Vec<String>, CliError> {
        if !self.is_illumos() {
            return Ok(args);
        }
        let name = self.name();
        // Global options may come before the verb.
        let mut at = 1;
        while let Some(a) = args.get(at) {
            match a.as_str() {
                "--json" => at += 1,
                "--bus" => at += 2,
                a if a.starts_with("--bus=") => at += 1,
                _ => break,
            }
        }
        if matches!(self, Self::Dlstat | Self::Flowstat) {
            // dlstat and flowstat are one verb each, netadm's of their
            // name: dlstat's subcommand (show-link, show-aggr, ...) is
            // that verb's first operand.
            if at > args.len() {
                return Err(CliError::invalid_argument("--bus needs a value (the bus address)"));
            }
            args[0] = name.to_owned();
            args.insert(at, name.to_owned());
            return Ok(args);
        }
        let Some(verb) = args.get(at).cloned() else {
            if self == Self::Dladm {
                // `dladm` alone shows the links, as illumos's does.
                args.push("show-link".to_owned());
            }
            return Ok(args);
        };
        if verb.starts_with('-') || verb == "help" {
            return Ok(args); // -h, --help, -V, help VERB: clap's.
        }
        let netadm_verb = match self {
            Self::Dladm if DLADM.contains(&verb.as_str()) => verb.clone(),
            Self::Dladm if DLADM_NOT_YET.contains(&verb.as_str()) => {
                return Err(not_yet(verb));
            }
            Self::Flowadm if FLOWADM.contains(&verb.as_str()) => verb.clone(),
            Self::Flowadm if FLOWADM_NOT_YET.contains(&verb.as_str()) => {
                return Err(not_yet(verb));
            }
            Self::Ipadm if IPADM_NOT_YET.contains(&verb.as_str()) => {
                return Err(not_yet(verb));
            }
            Self::Ipadm => match IPADM.iter().find(|(i, _)| *i == verb) {
                Some((_, n)) => (*n).to_owned(),
                None => return Err(unknown(name, &verb)),
            },
            _ => return Err(unknown(name, &verb)),
        };
        args[0] = name.to_owned();
        args[at] = netadm_verb.clone();
        let mut out: Vec<String> = args.drain(..=at).collect();
        let mut rest = args.into_iter();
        while let Some(a) = rest.next() {
            if a == "--" {
                out.push(a);
                out.extend(rest.by_ref());
                break;
            }
            let (flag, inline) = match a.strip_prefix("--") {
                Some(long)
                    if !["json", "bus", "help"].contains(&long) && !long.starts_with("bus=") =>
                {
                    let (opt, val) = match long.split_once('=') {
                        Some((o, v)) => (o, Some(v.to_owned())),
                        None => (long, None),
                    };
                    (long_option(&verb, opt)?.to_owned(), val)
                }
                _ => match a.strip_prefix('-').filter(|s| s.len() > 1 && !a.starts_with("--")) {
                    // `-aVALUE`: the value glued to its option.
                    Some(s) if s.starts_with('a') && verb == "create-addr" => {
                        ("-a".to_owned(), Some(s[1..].to_owned()))
                    }
                    _ => (a, None),
                },
            };
            if self == Self::Ipadm {
                ipadm_option(&verb, &flag)?;
            }
            let takes_value = flag == "-a" || flag == "-T";
            let value = if inline.is_none() && takes_value && verb == "create-addr" {
                rest.next()
            } else {
                inline
            };
            let value = match (verb.as_str(), flag.as_str(), value) {
                ("create-addr", "-a", Some(v)) => Some(local_address(&v)?),
                (_, _, v) => v,
            };
            out.push(flag);
            out.extend(value);
        }
        Ok(out)
    }
}

impl Personality {
    /// netadm's command definition as this command shows it in `--help`:
    /// its own name, and only the verbs it accepts.
    pub fn command(self, cmd: clap::Command) -> clap::Command {
        let keep = |verb: &str| match self {
            Self::Netadm => true,
            Self::Dladm => DLADM.contains(&verb),
            Self::Ipadm => IPADM.iter().any(|(_, n)| *n == verb),
            Self::Dlstat | Self::Flowstat => verb == self.name(),
            Self::Flowadm => FLOWADM.contains(&verb),
        };
        let hide: Vec<String> =
            cmd.get_subcommands().map(|s| s.get_name().to_owned()).filter(|v| !keep(v)).collect();
        let mut cmd = hide.iter().fold(cmd, |c, v| c.mut_subcommand(v, |s| s.hide(true)));
        if self == Self::Ipadm {
            for (illumos, netadm) in IPADM.iter().filter(|(i, n)| i != n) {
                if cmd.find_subcommand(netadm).is_some() {
                    cmd = cmd.mut_subcommand(netadm, |s| s.visible_alias(illumos));
                }
            }
        }
        cmd.name(self.name()).bin_name(self.name())
    }

    /// illumos's `ipadm delete-if`/`delete-addr` remove the object wherever
    /// it is (they have no `-t`); netadm's refuse, without `-t`, an object
    /// that is only temporary. When `e` is that refusal of the translated
    /// command line `args`, the same line with `-t`, to run instead.
    pub fn delete_temporary(self, args: &[String], e: &CliError) -> Option<Vec<String>> {
        let at = args.iter().position(|a| a == "delete-if" || a == "delete-addr")?;
        let refused = e.kind == "NotFound" && e.message.contains("persistent configuration");
        if self != Self::Ipadm || !refused || args.iter().any(|a| a == "-t") {
            return None;
        }
        let mut with_t = args.to_vec();
        with_t.insert(at + 1, "-t".to_owned());
        Some(with_t)
    }
}

/// The short option netadm spells illumos's `--opt` with.
fn long_option(verb: &str, opt: &str) -> Result<&'static str, CliError> {
    if opt == "parsable"
        && ["show-linkprop", "show-ifprop", "show-addrprop", "show-prop", "show-flowprop"]
            .contains(&verb)
    {
        return Ok("-c");
    }
    LONG.iter()
        .find(|(l, _)| *l == opt)
        .map(|(_, s)| *s)
        .ok_or_else(|| CliError::invalid_argument(format!("{verb}: unknown option --{opt}")))
}

/// Refuses ipadm options that only DHCP or down addresses have.
fn ipadm_option(verb: &str, flag: &str) -> Result<(), CliError> {
    let what = match (verb, flag) {
        ("create-addr", "-d") => "create-addr -d (an address created down)",
        ("create-addr", "-w" | "-1" | "-h") => "create-addr -T dhcp -w/-1/-h",
        ("create-addr", "-i" | "-p") => "create-addr -T addrconf -i/-p",
        ("delete-addr", "-r") => "delete-addr -r (releasing a DHCP lease)",
        _ => return Ok(()),
    };
    Err(not_yet(what.to_owned()))
}

/// The address of ipadm's `-a`: `ADDR/PREFIX`, `local=ADDR/PREFIX`;
/// `remote=` (point-to-point) is not supported yet.
fn local_address(v: &str) -> Result<String, CliError> {
    let mut local = None;
    for part in v.split(',') {
        let addr = match part.split_once('=') {
            None => part,
            Some(("local", a)) => a,
            Some(("remote", _)) => {
                return Err(not_yet(
                    "create-addr -a remote=... (point-to-point addresses)".to_owned(),
                ));
            }
            Some((k, _)) => {
                return Err(CliError::invalid_argument(format!(
                    "create-addr -a {v:?}: unknown key {k:?} (expected local= or remote=)"
                )));
            }
        };
        if local.replace(addr).is_some() {
            return Err(CliError::invalid_argument(format!(
                "create-addr -a {v:?}: more than one local address"
            )));
        }
    }
    local.filter(|a| !a.is_empty()).map(str::to_owned).ok_or_else(|| {
        CliError::invalid_argument(format!("create-addr -a {v:?}: no local address"))
    })
}

/// A verb or option illumos has and netadm not yet.
fn not_yet(what: String) -> CliError {
    CliError::new("NotSupported", format!("{what} is not supported yet"))
}

fn unknown(name: &str, verb: &str) -> CliError {
    CliError::invalid_argument(format!("unknown subcommand '{verb}' (`{name} --help` lists them)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(p: Personality, args: &[&str]) -> Result<Vec<String>, CliError> {
        let mut v = vec![p.name().to_owned()];
        v.extend(args.iter().map(|s| (*s).to_owned()));
        p.translate(v)
    }

    #[test]
    fn names() {
        assert_eq!(Personality::from_argv0(Some("/usr/sbin/dladm")), Personality::Dladm);
        assert_eq!(Personality::from_argv0(Some("ipadm")), Personality::Ipadm);
        assert_eq!(Personality::from_argv0(Some("/x/netadm")), Personality::Netadm);
        assert_eq!(Personality::from_argv0(None), Personality::Netadm);
        assert_eq!(Personality::from_argv0(Some("/usr/sbin/dlstat")), Personality::Dlstat);
        let t = |args: &[&str]| {
            let mut v = vec!["dlstat".to_owned()];
            v.extend(args.iter().map(|a| a.to_string()));
            Personality::Dlstat.translate(v).unwrap()
        };
        // dlstat's subcommands are operands of netadm's dlstat verb.
        assert_eq!(t(&[]), ["dlstat", "dlstat"]);
        assert_eq!(
            t(&["--json", "show-aggr", "-r", "aggr0"]),
            ["dlstat", "--json", "dlstat", "show-aggr", "-r", "aggr0"]
        );
        assert_eq!(t(&["-i", "1", "net0"]), ["dlstat", "dlstat", "-i", "1", "net0"]);
        // `--bus` with no address is refused, not a panic.
        for p in [Personality::Dlstat, Personality::Flowstat] {
            let mut v = vec![p.name().to_owned()];
            v.extend(["--json", "--bus"].map(String::from));
            let e = p.translate(v).expect_err("--bus without its value");
            assert!(e.to_string().contains("--bus needs a value"), "{e}");
        }
    }

    #[test]
    fn ipadm_spellings() {
        use Personality::Ipadm;
        assert_eq!(t(Ipadm, &["create-ip", "net0"]).unwrap(), ["ipadm", "create-if", "net0"]);
        assert_eq!(t(Ipadm, &["delete-ip", "net0"]).unwrap(), ["ipadm", "delete-if", "net0"]);
        assert_eq!(
            t(Ipadm, &["create-addr", "-T", "static", "-a", "local=192.0.2.1/24", "net0/v4"])
                .unwrap(),
            ["ipadm", "create-addr", "-T", "static", "-a", "192.0.2.1/24", "net0/v4"]
        );
        assert_eq!(
            t(
                Ipadm,
                &[
                    "--json",
                    "create-addr",
                    "--temporary",
                    "--type=static",
                    "-alocal=::1/128",
                    "lo/v6"
                ]
            )
            .unwrap(),
            ["ipadm", "--json", "create-addr", "-t", "-T", "static", "-a", "::1/128", "lo/v6"]
        );
        assert_eq!(
            t(Ipadm, &["create-addr", "-T", "dhcp", "net0/d"]).unwrap(),
            ["ipadm", "create-addr", "-T", "dhcp", "net0/d"]
        );
        assert_eq!(
            t(Ipadm, &["create-addr", "-T", "addrconf", "net0/v6"]).unwrap(),
            ["ipadm", "create-addr", "-T", "addrconf", "net0/v6"]
        );
        let e = t(Ipadm, &["create-addr", "-T", "addrconf", "-i", "::1", "net0/d"]).unwrap_err();
        assert_eq!(e.kind, "NotSupported");
        assert!(e.message.contains("-T addrconf -i/-p"), "{}", e.message);
        let e = t(Ipadm, &["create-addr", "-a", "local=1.2.3.4/32,remote=1.2.3.5", "x/y"]);
        assert_eq!(e.unwrap_err().kind, "NotSupported");
        assert_eq!(
            t(Ipadm, &["create-addr", "-a", "local=", "x/y"]).unwrap_err().kind,
            "InvalidArgument"
        );
        assert_eq!(
            t(Ipadm, &["set-ifprop", "-p", "mtu=1400", "--module=ipv4", "net0"]).unwrap(),
            ["ipadm", "set-ifprop", "-p", "mtu=1400", "-m", "ipv4", "net0"]
        );
        assert_eq!(t(Ipadm, &["enable-addr", "net0/v4"]).unwrap_err().kind, "NotSupported");
        assert_eq!(t(Ipadm, &["show-link"]).unwrap_err().kind, "InvalidArgument");
    }

    #[test]
    fn dladm_spellings() {
        use Personality::Dladm;
        assert_eq!(t(Dladm, &[]).unwrap(), ["dladm", "show-link"]);
        // A property's list of values rides in one -p list (split by
        // `assignments`, as dladm splits it).
        assert_eq!(
            t(Dladm, &["set-linkprop", "--prop=protection=mac-nospoof,ip-nospoof", "vnic0"])
                .unwrap(),
            ["dladm", "set-linkprop", "-p", "protection=mac-nospoof,ip-nospoof", "vnic0"]
        );
        assert_eq!(
            t(Dladm, &["show-linkprop", "--parsable", "--output=value", "--prop", "mtu", "net0"])
                .unwrap(),
            ["dladm", "show-linkprop", "-c", "-o", "value", "-p", "mtu", "net0"]
        );
        assert_eq!(
            t(Dladm, &["create-vlan", "--temporary", "--link=net0", "--vid", "5", "vlan5"])
                .unwrap(),
            ["dladm", "create-vlan", "-t", "-l", "net0", "-v", "5", "vlan5"]
        );
        assert_eq!(
            t(Dladm, &["show-vlan", "-p", "-o", "link,vid"]).unwrap(),
            ["dladm", "show-vlan", "-p", "-o", "link,vid"]
        );
        assert_eq!(t(Dladm, &["delete-vlan", "vlan5"]).unwrap(), ["dladm", "delete-vlan", "vlan5"]);
        assert_eq!(
            t(Dladm, &["create-etherstub", "--temporary", "stub0"]).unwrap(),
            ["dladm", "create-etherstub", "-t", "stub0"]
        );
        assert_eq!(
            t(Dladm, &["show-etherstub", "stub0"]).unwrap(),
            ["dladm", "show-etherstub", "stub0"]
        );
        let e = t(Dladm, &["create-bridge", "br0"]).unwrap_err();
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            ("NotSupported", "create-bridge is not supported yet")
        );
        assert_eq!(t(Dladm, &["create-if", "net0"]).unwrap_err().kind, "InvalidArgument");
        assert_eq!(t(Dladm, &["show-link", "--bogus"]).unwrap_err().kind, "InvalidArgument");
        assert_eq!(t(Dladm, &["show-vnic", "--help"]).unwrap(), ["dladm", "show-vnic", "--help"]);
    }

    #[test]
    fn deleting_a_temporary_object() {
        let refused = CliError::not_found(
            "IP interface net0 does not exist; in the persistent configuration (use -t ...)",
        );
        let args: Vec<String> = ["ipadm", "delete-if", "net0"].map(String::from).to_vec();
        assert_eq!(
            Personality::Ipadm.delete_temporary(&args, &refused).unwrap(),
            ["ipadm", "delete-if", "-t", "net0"]
        );
        assert_eq!(Personality::Netadm.delete_temporary(&args, &refused), None);
        let gone = CliError::not_found("IP interface net0 does not exist");
        assert_eq!(Personality::Ipadm.delete_temporary(&args, &gone), None);
    }

    #[test]
    fn help_lists_the_commands_own_verbs() {
        let cmd = clap::Command::new("netadm")
            .subcommand(clap::Command::new("show-link"))
            .subcommand(clap::Command::new("show-addr"));
        let shown = |p: Personality| -> Vec<String> {
            p.command(cmd.clone())
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name().to_owned())
                .collect()
        };
        assert_eq!(shown(Personality::Dladm), ["show-link"]);
        assert_eq!(shown(Personality::Ipadm), ["show-addr"]);
        assert_eq!(shown(Personality::Netadm), ["show-link", "show-addr"]);
    }

    #[test]
    fn netadm_is_untouched() {
        let a = t(Personality::Netadm, &["create-addr", "-a", "local=x"]).unwrap();
        assert_eq!(a, ["netadm", "create-addr", "-a", "local=x"]);
    }
}
