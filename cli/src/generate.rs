//! `netadm __generate DIR` (feature `gen`, run by `packaging/build-deb`):
//! the man pages netadm(8), dladm(8) and ipadm(8) and the shell
//! completions for bash, zsh and fish, all from the clap definitions the
//! binary parses with, so they cannot drift from it.
//!
//! - A page is clap_mangen's title, name, synopsis and global options,
//!   then a section per verb (its synopsis, help and options, as clap_mangen
//!   renders a command), the link properties from the model's own table
//!   (`netadm_model::PropSpec::all`), and the sections a command line
//!   cannot say (output, exit status, environment, files, examples).
//!   dladm(8) and ipadm(8) are the same command under each personality
//!   (`illumos::Personality::command`: only its verbs, ipadm's illumos
//!   names as aliases), with illumos's long options and what is not
//!   supported yet.
//! - A completion script is clap_complete's, for verbs and options, and
//!   after it a layer of ours that completes the names netadmd has
//!   (links, VNICs, IP interfaces, address objects, ...) by calling
//!   `netadm __complete KIND` ([`crate::complete`]), where a verb takes
//!   one: its positional argument and the options whose value names one,
//!   read from the same definitions ([`names_wanted`]).

use std::fmt::Write as _;
use std::path::Path;

use clap::{Arg, ArgAction, Command, CommandFactory};
use clap_complete::Shell;
use clap_mangen::Man;
use clap_mangen::roff::{Inline, Roff, bold, italic, roman};
use netadm_model::{DEFAULT_PRIORITY, Perm, PropName, PropSpec};

use crate::Cli;
use crate::illumos::{self, Personality};

/// Writes `DIR/man/{netadm,dladm,ipadm}.8`, dated `date` (the package
/// build gives the last commit's, so a rebuild is the same), and
/// `DIR/completions/{bash,zsh,fish}/...`.
pub fn generate(dir: &Path, date: &str) -> Result<(), String> {
    let write = |rel: &str, text: &str| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("a file in a folder"))
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    for who in [
        Personality::Netadm,
        Personality::Dladm,
        Personality::Ipadm,
        Personality::Dlstat,
        Personality::Flowadm,
        Personality::Flowstat,
    ] {
        let name = who.name();
        write(&format!("man/{name}.8"), &man_page(who, date))?;
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let file = match shell {
                Shell::Bash => format!("completions/bash/{name}"),
                Shell::Zsh => format!("completions/zsh/_{name}"),
                _ => format!("completions/fish/{name}.fish"),
            };
            write(&file, &completion(who, shell))?;
        }
    }
    Ok(())
}

/// The command as `who` parses it, not built: what clap_complete builds.
/// Its verbs' own options are deferred (each verb is built when it is the
/// one typed).
fn command(who: Personality) -> Command {
    who.command(Cli::command())
}

/// The command as a page shows it: built, so every verb has its own
/// options, and the options building adds to each verb (the global ones,
/// which the page lists once, at the top, and `-h`) hidden there.
fn resolved(who: Personality) -> Command {
    let mut cmd = command(who);
    cmd.build();
    let mut added: Vec<clap::Id> =
        cmd.get_arguments().filter(|a| a.is_global_set()).map(|a| a.get_id().clone()).collect();
    added.push("help".into());
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    let hide = |c: Command, ids: &[clap::Id]| {
        ids.iter().fold(c, |c, id| {
            if c.get_arguments().any(|a| a.get_id() == id) {
                c.mut_arg(id, |a| a.hide(true))
            } else {
                c
            }
        })
    };
    names.iter().fold(cmd, |c, n| c.mut_subcommand(n, |s| hide(s, &added)))
}

/// The visible verbs of `cmd`, in the order `--help` lists them.
fn verbs(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

/// What clap_mangen renders of `man` with `render`, without its `.SH`
/// heading (the caller names the section itself).
fn body(man: &Man, render: fn(&Man, &mut dyn std::io::Write) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    render(man, &mut out).expect("writing to memory");
    let text = String::from_utf8(out).expect("roff is text");
    text.lines().filter(|l| !l.starts_with(".SH")).map(|l| format!("{l}\n")).collect()
}

/// `.SH TITLE` and paragraphs (blank lines between them), as roff.
fn section(title: &str, paragraphs: &[&str]) -> String {
    let mut r = Roff::new();
    r.control("SH", [title]);
    for (i, p) in paragraphs.iter().enumerate() {
        if i > 0 {
            r.control("PP", []);
        }
        r.text([roman(*p)]);
    }
    r.to_roff()
}

/// A list of `.TP` items: a bold term and its text.
fn items(title: &str, items: &[(String, String)]) -> String {
    let mut r = Roff::new();
    r.control("SH", [title]);
    for (term, text) in items {
        r.control("TP", []);
        r.text([bold(term.as_str())]);
        r.text([roman(text.as_str())]);
    }
    r.to_roff()
}

/// Commands shown as they are typed (`.EX` blocks), each after its
/// explanation.
fn examples(list: &[(&str, &str)]) -> String {
    let mut r = Roff::new();
    r.control("SH", ["EXAMPLES"]);
    for (what, cmd) in list {
        r.control("PP", []);
        r.text([roman(*what)]);
        r.control("PP", []);
        r.control("RS", ["4"]);
        r.control("EX", []);
        for line in cmd.lines() {
            r.text([roman(line)]);
        }
        r.control("EE", []);
        r.control("RE", []);
    }
    r.to_roff()
}

/// One verb: `.SS name` (with its aliases), its synopsis, its help and its
/// options, as clap_mangen renders a command of its own.
fn verb(bin: &str, sub: &Command) -> String {
    let name = sub.get_name();
    let sub = sub.clone().bin_name(format!("{bin} {name}")).disable_help_flag(true);
    let man = Man::new(sub.clone());
    let mut r = Roff::new();
    let aliases: Vec<&str> = sub.get_visible_aliases().collect();
    let title = if aliases.is_empty() {
        name.to_owned()
    } else {
        format!("{name} ({})", aliases.join(", "))
    };
    r.control("SS", [title.as_str()]);
    r.text(synopsis(bin, &sub));
    r.control("PP", []);
    let mut out = r.to_roff();
    out += &body(&man, Man::render_description_section);
    if sub.get_arguments().any(|a| !a.is_hide_set()) {
        out += &body(&man, Man::render_options_section);
    }
    out
}

/// A verb's synopsis: its options as typed (`[-t]`, `-l LINK`, `[-o
/// FIELD,...]`; `...` where one may repeat), then its operands.
fn synopsis(bin: &str, sub: &Command) -> Vec<Inline> {
    let mut line = vec![bold(format!("{bin} {}", sub.get_name()))];
    let value = |a: &Arg| {
        let v = a.get_value_names().and_then(|v| v.first()).map(ToString::to_string);
        v.unwrap_or_else(|| a.get_id().as_str().to_uppercase())
    };
    for a in sub.get_arguments().filter(|a| !a.is_hide_set()) {
        let optional = !a.is_required_set();
        line.push(roman(if optional { " [" } else { " " }));
        if a.is_positional() {
            line.push(italic(value(a)));
        } else {
            let flag = match (a.get_short(), a.get_long()) {
                (Some(s), _) => format!("-{s}"),
                (None, Some(l)) => format!("--{l}"),
                (None, None) => continue,
            };
            line.push(bold(flag));
            if a.get_action().takes_values() {
                line.push(roman(" "));
                line.push(italic(value(a)));
            }
        }
        if optional {
            line.push(roman("]"));
        }
        if matches!(a.get_action(), ArgAction::Append) {
            line.push(roman("..."));
        }
    }
    line
}

/// The link properties, from the model's table: what each is, whether it
/// can be set, which links have it, its possible values and default.
fn link_properties() -> String {
    let list: Vec<(String, String)> = PropSpec::all()
        .iter()
        .map(|p| {
            let classes: Vec<String> = p.classes.iter().map(ToString::to_string).collect();
            let mut text =
                format!("{} ({}; {}).", capital(p.description), p.perm, classes.join(", "));
            let possible = match p.name {
                PropName::Maxbw => {
                    "1.2M to 400G, in dladm's syntax (100M, 1G, 1500K; Mb/s without a suffix)"
                        .to_owned()
                }
                PropName::Zone => "a name under /run/netns or an absolute path".to_owned(),
                _ => p.possible(),
            };
            if p.perm == Perm::ReadWrite {
                let _ = write!(text, " Possible: {possible}.");
            }
            match (&p.default, p.name) {
                (Some(d), _) => {
                    let _ = write!(text, " Default: {d}.");
                }
                (None, PropName::Priority) => {
                    let _ = write!(text, " Default: {DEFAULT_PRIORITY}.");
                }
                _ => {}
            }
            (p.name.to_string(), text)
        })
        .collect();
    items("LINK PROPERTIES", &list)
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// ipadm's properties (interface, address, protocol), as netadmd has them.
const IP_PROPERTIES: &[(&str, &str)] = &[
    (
        "forwarding (set-ifprop -m ipv4|ipv6)",
        "Whether the interface forwards packets: on or off (default off); /proc/sys/net/IPV/conf/IF/forwarding.",
    ),
    (
        "mtu (set-ifprop -m ipv4|ipv6)",
        "The interface's MTU for the protocol: ipv4 68 to its link's MTU (the device's MTU), ipv6 1280 to the interface's.",
    ),
    (
        "prefixlen (set-addrprop)",
        "A static address's prefix length: 1-32 (IPv4) or 1-128 (IPv6); the address is put back in the kernel with it.",
    ),
    (
        "deprecated (set-addrprop)",
        "on: the static address's preferred lifetime is 0 (the kernel's deprecated flag): kept, not chosen as a source.",
    ),
    ("broadcast (show-addrprop)", "A static IPv4 address's broadcast address (read-only)."),
    ("forwarding (set-prop ipv4|ipv6)", "Forwarding in netadmd's network namespace: on or off."),
    ("ttl (set-prop ipv4)", "The default TTL, 1-255 (the kernel's default 64)."),
    ("ecn (set-prop tcp)", "Explicit congestion notification: passive (default), never or active."),
];

/// The man page of `who`, dated `date`.
fn man_page(who: Personality, date: &str) -> String {
    let cmd = resolved(who);
    let name = who.name();
    let version = cmd.get_version().unwrap_or_default().to_owned();
    let man = Man::new(cmd.clone())
        .title(name.to_uppercase())
        .section("8")
        .date(date)
        .source(format!("netadm {version}"))
        .manual("System Administration");
    let mut out = String::new();
    out += &body(&man, Man::render_title);
    let about = match who {
        Personality::Netadm => "administer datalinks and IP interfaces through netadmd",
        Personality::Dladm => "administer datalinks (netadm under illumos's name)",
        Personality::Ipadm => {
            "administer IP interfaces and addresses (netadm under illumos's name)"
        }
        Personality::Dlstat => "show traffic counters per link (netadm under illumos's name)",
        Personality::Flowadm => "administer flows (netadm under illumos's name)",
        Personality::Flowstat => "show what each flow carried (netadm under illumos's name)",
    };
    out += &section("NAME", &[&format!("{name} - {about}")]);
    out += &section("SYNOPSIS", &[]);
    out += &format!(
        ".B {name}\n[\\fIGLOBAL OPTIONS\\fR] \\fIVERB\\fR [\\fIOPTIONS\\fR] [\\fINAME\\fR]\n"
    );
    out += &section("DESCRIPTION", &description(who));
    out += ".SH GLOBAL OPTIONS\n";
    out += &body(&man, Man::render_options_section);
    out += ".SH VERBS\n";
    for sub in verbs(&cmd) {
        out += &verb(name, sub);
    }
    if matches!(who, Personality::Dladm | Personality::Ipadm) {
        out += &long_options(who);
        out += &not_yet(who);
    }
    if matches!(who, Personality::Netadm | Personality::Dladm) {
        out += &link_properties();
    }
    if matches!(who, Personality::Netadm | Personality::Ipadm) {
        let list: Vec<(String, String)> =
            IP_PROPERTIES.iter().map(|(t, d)| ((*t).to_owned(), (*d).to_owned())).collect();
        out += &items("IP PROPERTIES", &list);
    }
    out += &section("OUTPUT", OUTPUT);
    out += &exit_status(who);
    out += &items(
        "ENVIRONMENT",
        &[
            (
                "NETADM_BUS".into(),
                "The bus to reach netadmd on when --bus is not given: system, session or a D-Bus address (default system).".into(),
            ),
            (
                "NETADM_PRIVATE".into(),
                "The netadmd private socket tried before the bus (empty: none). Unset, /run/netadm/private when the bus is the system bus.".into(),
            ),
        ],
    );
    out += &files();
    out += &examples(match who {
        Personality::Netadm => NETADM_EXAMPLES,
        Personality::Dladm => DLADM_EXAMPLES,
        Personality::Ipadm => IPADM_EXAMPLES,
        Personality::Dlstat => DLSTAT_EXAMPLES,
        Personality::Flowadm => FLOWADM_EXAMPLES,
        Personality::Flowstat => FLOWSTAT_EXAMPLES,
    });
    let others: Vec<String> =
        ["netadm", "dladm", "ipadm", "dlstat", "flowadm", "flowstat", "netadmd"]
            .iter()
            .filter(|o| **o != name)
            .map(|o| format!("{o}(8)"))
            .chain(["netadm.toml(5)".to_owned(), "systemctl(1)".to_owned()])
            .collect();
    out += &section("SEE ALSO", &[&others.join(", ")]);
    // Doc comments mark names with backticks, which a page does not.
    out.replace('`', "")
}

/// What the command is, in paragraphs.
fn description(who: Personality) -> Vec<&'static str> {
    let common = "Every verb is a call to netadmd(8), the daemon that owns the links, over D-Bus (org.netadm.Netadm1 on the system bus unless --bus or NETADM_BUS says otherwise; run as root, peer to peer on netadmd's private socket, /run/netadm/private, when it can). Anyone may run the show verbs; only root and members of group netadm may change anything. A change is persistent (written to /var/lib/netadm/links.toml and made again when netadmd starts) unless -t makes it temporary, and it happens whole or not at all.";
    match who {
        Personality::Netadm => vec![
            "netadm administers datalinks (physical links, aggregations, VNICs, VLANs, etherstubs) and IP interfaces and addresses, with the verbs and output of illumos's dladm and ipadm, plus netadm's own: desired state (show-config, apply), timings (show-history) and a traffic generator.",
            common,
            "dladm(8) and ipadm(8) are this program under illumos's names, with illumos's spellings and exit codes.",
        ],
        Personality::Dladm => vec![
            "dladm is netadm(8) started under that name (/usr/sbin/dladm is a link to it): it accepts the datalink verbs of illumos's dladm that netadm has, with their long options, and prints what illumos's prints, so illumos scripts and Ansible's community.network dladm modules run against netadm. Without a verb it is dladm show-link. Mutating verbs print nothing on success unless --json.",
            common,
        ],
        Personality::Ipadm => vec![
            "ipadm is netadm(8) started under that name (/usr/sbin/ipadm is a link to it): it accepts the IP interface, address and property verbs of illumos's ipadm that netadm has, under illumos's names (create-ip, delete-ip, ... as well as netadm's create-if, ...), with their long options, so illumos scripts and Ansible's community.network ipadm modules run against netadm. Mutating verbs print nothing on success unless --json. delete-if and delete-addr remove a temporary object without -t, as illumos's do.",
            common,
        ],
        Personality::Dlstat => vec![
            "dlstat is netadm(8) started under that name (/usr/sbin/dlstat is a link to it), netadm's dlstat verb: what each link received and sent (IPKTS RBYTES OPKTS OBYTES), as illumos's dlstat prints it. show-link (the default) shows every link but etherstubs, show-phys the physical links, show-aggr each aggregation's ports, show-vnic the VNICs. -r shows the receive side, -t the transmit side, each with its drops; -i INTERVAL repeats, showing what each interval counted (-c COUNT stops after COUNT tables).",
            "A physical link's and an aggregation port's counters are its port's; a VNIC's or VLAN's are its kernel device's (its IP interface over emulated links; its macvlan, veth or VLAN device over kernel ones), zero while it has none.",
        ],
        Personality::Flowadm => vec![
            "flowadm is netadm(8) started under that name (/usr/sbin/flowadm is a link to it): the flow verbs of illumos's flowadm. A flow is the traffic of one link that matches its attributes (transport, local_ip, remote_ip, local_port, remote_port, dsfield; seen from the link: local is its own side), which its properties govern: maxbw limits what it sends and what it receives (each way on its own, as flowadm's full-duplex maxbw), priority (low, medium, high; medium unless set) is its claim on the port when the port is saturated. A frame belongs to the most specific flow that matches it. Flows are enforced on netadm's datapath (links over its own ports) and, over kernel ports, as htb classes of the link's shaper on the device its frames leave by, what they receive counted and limited by nftables rules on that device; a kernel VLAN or a VNIC over a kernel etherstub refuses them (NotSupported). Mutating verbs print nothing on success unless --json.",
            common,
        ],
        Personality::Flowstat => vec![
            "flowstat is netadm(8) started under that name (/usr/sbin/flowstat is a link to it), netadm's flowstat verb: what each flow carried (IPKTS RBYTES OPKTS OBYTES), in its link's sense. -r shows the receive side, with IDROPS (what the flow's maxbw dropped on arrival), -t the transmit side, with ODROPS (what its maxbw or priority dropped on sending), -l LINK the flows of one link; -i INTERVAL repeats, showing what each interval counted (-c COUNT stops after COUNT tables).",
        ],
    }
}

/// illumos's long options, and the short ones they are.
fn long_options(who: Personality) -> String {
    let list: Vec<(String, String)> = illumos::LONG
        .iter()
        .map(|(long, short)| {
            let also = if *long == "parsable" { " (-c for the show-*prop verbs)" } else { "" };
            (format!("--{long}"), format!("The same as {short}{also}; --{long}=VALUE also works."))
        })
        .collect();
    let mut out = items("LONG OPTIONS", &list);
    if who == Personality::Ipadm {
        out += ".PP\nipadm's -a takes local=ADDR/PREFIX as well as ADDR/PREFIX.\n";
    }
    out
}

/// The verbs illumos's command has that this one refuses (NotSupported).
fn not_yet(who: Personality) -> String {
    let list =
        if who == Personality::Dladm { illumos::DLADM_NOT_YET } else { illumos::IPADM_NOT_YET };
    let text = format!(
        "These illumos verbs are refused with a NotSupported error naming the verb, before anything is asked of netadmd: {}.",
        list.join(", ")
    );
    section("NOT SUPPORTED", &[&text])
}

const OUTPUT: &[&str] = &[
    "Show verbs print a table: uppercase headers, columns padded to the widest cell. With -p (-c for the property verbs) and -o FIELD,... they print parsable lines: the fields separated by colons, a colon in a field written as a backslash and a colon, and a backslash as two, when more than one field is printed. -o is case-insensitive; all selects every field. With --json they print an array of objects keyed by the lowercased column names; dlstat and flowstat with -i print one such array a line, one line an interval (JSON Lines).",
    "Mutating verbs print what they did and how long it took (op object: total (phases); counts), and notes; with --json one object with op, object, timing, counts and notes. Errors print as COMMAND: MESSAGE on standard error; with --json as {\"error\": {\"kind\", \"message\"}}, where kind is netadmd's (NotFound, Busy, InvalidValue, ...), InvalidArgument for what the command line itself refuses, and Bus when netadmd cannot be reached.",
];

fn exit_status(who: Personality) -> String {
    let mut list = vec![
        ("0".to_owned(), "Success.".to_owned()),
        (
            "1".to_owned(),
            "netadmd refused or failed the verb (the error names what was wrong and nothing was changed), or netadmd could not be reached.".to_owned(),
        ),
    ];
    if who.is_illumos() {
        list[1].1 += " Also a malformed command line, as illumos's commands do.";
    } else {
        list.push(("2".to_owned(), "A malformed command line (a usage error).".to_owned()));
    }
    items("EXIT STATUS", &list)
}

fn files() -> String {
    let list = [
        (
            "/etc/netadm/netadm.toml",
            "The hardware configuration netadmd runs with: its ports and their wires (netadm.toml(5)).",
        ),
        (
            "/var/lib/netadm/links.toml",
            "The persistent configuration: what netadmd makes again when it starts (show-config prints it).",
        ),
        (
            "/var/lib/netadm/links.journal",
            "Changes appended since links.toml was last written whole, once it has grown past 64 KiB.",
        ),
        (
            "/var/lib/netadm/links.checkpoint.toml",
            "The configuration an apply --confirm-timeout rolls back to unless confirmed.",
        ),
        (
            "/run/netadm/private",
            "netadmd's private socket, root's alone: the same interface peer to peer, with no bus between. Run as root, netadm connects to it first, and takes the system bus when it cannot.",
        ),
        (
            "/usr/share/dbus-1/system.d/org.netadm.Netadm1.conf",
            "The bus policy: who may call what.",
        ),
        (
            "/usr/share/dbus-1/interfaces/org.netadm.Netadm1.xml",
            "The D-Bus interface netadmd serves, for other clients.",
        ),
    ];
    items("FILES", &list.map(|(f, t)| (f.to_owned(), t.to_owned())))
}

const NETADM_EXAMPLES: &[(&str, &str)] = &[
    (
        "An LACP aggregation of two ports with jumbo frames, and a VNIC over it limited to 100 Mb/s:",
        "netadm create-aggr -L active -l i40e0 -l i40e1 aggr0\nnetadm set-linkprop -p mtu=9000 aggr0\nnetadm create-vnic -l aggr0 -p maxbw=100M vnic0",
    ),
    (
        "An IP interface on it, with a static address, and what the daemon says of it as JSON:",
        "netadm create-if vnic0\nnetadm create-addr -T static -a 192.0.2.10/24 vnic0/v4\nnetadm --json show-addr vnic0/v4",
    ),
    (
        "The configuration as a document, edited and applied as one operation, undone unless confirmed within a minute:",
        "netadm show-config > net.toml\nnetadm apply --dry-run -f net.toml\nnetadm apply --confirm-timeout 60 -f net.toml\nnetadm confirm",
    ),
];

const DLADM_EXAMPLES: &[(&str, &str)] = &[
    (
        "The physical links, their factory MAC addresses and their Ethernet settings:",
        "dladm show-phys\ndladm show-phys -m\ndladm show-ether -x i40e0",
    ),
    (
        "Two VNICs that reach only each other, over an etherstub, one limited to 50 Mb/s:",
        "dladm create-etherstub stub0\ndladm create-vnic -l stub0 vnic1\ndladm create-vnic -l stub0 -p maxbw=50M vnic2",
    ),
    ("One property's value, for a script:", "dladm show-linkprop -c -o value -p mtu aggr0"),
];

const DLSTAT_EXAMPLES: &[(&str, &str)] = &[
    ("Every link's counters so far:", "dlstat"),
    ("What each port of aggr0 received, second by second:", "dlstat show-aggr -r -i 1 aggr0"),
    ("One VNIC's bytes sent, for a script:", "dlstat show-vnic -t -p -o obytes vnic0"),
];

const FLOWADM_EXAMPLES: &[(&str, &str)] = &[
    (
        "SSH on vnic0 limited to 10 Mb/s, and DNS sent first when the port is full:",
        "flowadm add-flow -l vnic0 -a transport=tcp,local_port=22 -p maxbw=10M ssh\nflowadm add-flow -l vnic0 -a transport=udp,remote_port=53 -p priority=high dns",
    ),
    (
        "The flows of vnic0, and their properties:",
        "flowadm show-flow -l vnic0\nflowadm show-flowprop -l vnic0",
    ),
];

const FLOWSTAT_EXAMPLES: &[(&str, &str)] =
    &[("What each flow sent, second by second:", "flowstat -t -i 1")];

const IPADM_EXAMPLES: &[(&str, &str)] = &[
    (
        "An IP interface with a static address and a DHCP one:",
        "ipadm create-ip vnic0\nipadm create-addr -T static -a local=192.0.2.10/24 vnic0/v4\nipadm create-addr -T dhcp vnic0/dhcp",
    ),
    ("The address objects, for a script:", "ipadm show-addr -p -o addrobj,addr"),
    ("Forwarding on, in netadmd's namespace:", "ipadm set-prop -p forwarding=on ipv4"),
];

/// What kind of name (a [`crate::complete::KINDS`] entry) an argument
/// takes, by its value name: `None` when it takes something else.
fn kind_of(arg: &Arg) -> Option<&'static str> {
    let value = arg.get_value_names().and_then(|v| v.first()).map(|v| v.as_str());
    let value = value.unwrap_or_else(|| arg.get_id().as_str());
    Some(match value.to_ascii_uppercase().as_str() {
        "LINK" | "OLD" => "links",
        "PORT" => "phys",
        "AGGR" => "aggrs",
        "VNIC" => "vnics",
        "VLAN" => "vlans",
        "ETHERSTUB" => "etherstubs",
        "IFNAME" | "IF" => "ifs",
        "ADDROBJ" | "IF/TAG" => "addrobjs",
        "PROTO" => "protos",
        "PROP,..." => "props",
        _ => return None,
    })
}

/// For each verb of `cmd` (and each of its aliases): the options that take
/// a value, with the kind of name it is (`-` for none), then the kind its
/// positional argument is, if it names one. The layer over clap's
/// completion reads the word before the cursor against it.
fn names_wanted(cmd: &Command) -> Vec<Wanted> {
    let mut out = Vec::new();
    for sub in verbs(cmd) {
        let options: Vec<(String, &str)> = sub
            .get_arguments()
            .filter(|a| !a.is_positional() && a.get_action().takes_values())
            .flat_map(|a| {
                let kind = kind_of(a).unwrap_or("-");
                let short = a.get_short().map(|s| format!("-{s}"));
                let long = a.get_long().map(|l| format!("--{l}"));
                short.into_iter().chain(long).map(move |f| (f, kind))
            })
            .collect();
        // A create verb's operand is a new name, except create-if's: the
        // link the interface goes on.
        let positional = match sub.get_name() {
            "create-if" => Some("links"),
            v if v.starts_with("create-") => None,
            _ => sub.get_positionals().find_map(kind_of),
        };
        for name in std::iter::once(sub.get_name()).chain(sub.get_visible_aliases()) {
            out.push(Wanted { verb: name.to_owned(), options: options.clone(), positional });
        }
    }
    out
}

/// clap_complete's script for `who` in `shell`, and our layer over it.
fn completion(who: Personality, shell: Shell) -> String {
    let mut cmd = command(who);
    let name = who.name();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    let clap = String::from_utf8(script).expect("scripts are text");
    let table = names_wanted(&cmd);
    match shell {
        Shell::Bash => bash(name, &clap, &table),
        Shell::Zsh => zsh(name, &clap, &table),
        _ => fish(name, &clap, &table),
    }
}

/// What names one verb takes.
struct Wanted {
    /// The verb (or an alias of it).
    verb: String,
    /// Its options that take a value, and the kind of name each is (`-`
    /// for none).
    options: Vec<(String, &'static str)>,
    /// The kind of name its positional argument is, if it names one.
    positional: Option<&'static str>,
}

type Table = [Wanted];

/// The `case` arms, one per verb and option: `VERB FLAG` to the kind of
/// its value, then `VERB *` to its positional's (shell glob syntax, the
/// same in bash and zsh).
fn case_arms(table: &Table) -> String {
    let mut arms = String::new();
    for w in table {
        for (flag, kind) in &w.options {
            let _ = writeln!(arms, "        '{} {flag}') echo {kind} ;;", w.verb);
        }
    }
    for w in table {
        if let Some(kind) = w.positional {
            let _ = writeln!(arms, "        '{} '*) echo {kind} ;;", w.verb);
        }
    }
    arms
}

/// The shell functions bash and zsh share: which kind of name the word
/// being completed is, for verb `$1` after word `$2` (`-` or nothing when
/// none), and which word is the verb.
fn want_function(name: &str, table: &Table) -> String {
    WANTS.replace("NAME", name).replace("        ARMS\n", &case_arms(table))
}

const WANTS: &str = r#"
# netadm: names from the running netadmd where a verb takes one.
# Which kind of name (netadm __complete KIND) the word after "$2" is, for
# verb "$1": nothing (or -) when it is no name.
__NAME_wants() {
    case "$1 $2" in
        *' --bus') echo - ;;
        ARMS
    esac
}

# The verb among the words before the cursor: the first that is no option
# (nor --bus's value).
__NAME_verb() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --bus) shift ;;
            -*) ;;
            *) echo "$1"; return ;;
        esac
        shift
    done
}
"#;

fn bash(name: &str, clap: &str, table: &Table) -> String {
    let ours = r#"
_NAME_names() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" verb
    verb=$(__NAME_verb "${COMP_WORDS[@]:1:COMP_CWORD-1}")
    if [[ -n $verb && $cur != -* ]]; then
        local kind
        kind=$(__NAME_wants "$verb" "$prev")
        if [[ -n $kind && $kind != - ]]; then
            local IFS=$'\n'
            COMPREPLY=($(compgen -W "$(netadm __complete "$kind" 2>/dev/null)" -- "$cur"))
            return 0
        fi
    fi
    _NAME "$@"
}
complete -F _NAME_names -o bashdefault -o default NAME
"#;
    format!("{clap}{}{}", want_function(name, table), ours.replace("NAME", name))
}

fn zsh(name: &str, clap: &str, table: &Table) -> String {
    // clap's `_NAME` becomes `_NAME_clap`, called by ours; its last lines
    // (register or run `_NAME`) are replaced by ours, which do the same.
    let clap = clap.replace(&format!("_{name}() {{"), &format!("_{name}_clap() {{"));
    let clap = match clap.rfind(&format!("if [ \"$funcstack[1]\" = \"_{name}\" ]")) {
        Some(at) => clap[..at].to_owned(),
        None => clap,
    };
    let ours = r#"
_NAME() {
    local verb=$(__NAME_verb "${(@)words[2,CURRENT-1]}")
    if [[ -n $verb && ${words[CURRENT]} != -* ]]; then
        local kind=$(__NAME_wants "$verb" "${words[CURRENT-1]}")
        if [[ -n $kind && $kind != - ]]; then
            local -a names
            names=(${(f)"$(netadm __complete $kind 2>/dev/null)"})
            compadd -a names
            return
        fi
    fi
    _NAME_clap "$@"
}

if [ "$funcstack[1]" = "_NAME" ]; then
    _NAME "$@"
else
    compdef _NAME NAME
fi
"#;
    format!("{clap}{}{}", want_function(name, table), ours.replace("NAME", name))
}

fn fish(name: &str, clap: &str, table: &Table) -> String {
    let mut out =
        format!("{clap}\n# netadm: names from the running netadmd where a verb takes one.\n");
    for Wanted { verb, options, positional } in table {
        let on = format!("__fish_seen_subcommand_from {verb}");
        // An option's value: candidates for the option itself (fish
        // merges them with clap's entry for it).
        for (flag, kind) in options.iter().filter(|(_, k)| *k != "-") {
            let opt = match flag.strip_prefix("--") {
                Some(long) => format!("-l {long}"),
                None => format!("-s {}", flag.trim_start_matches('-')),
            };
            let _ = writeln!(
                out,
                "complete -c {name} -n '{on}' {opt} -r -f -a '(netadm __complete {kind} 2>/dev/null)'"
            );
        }
        if let Some(kind) = positional {
            let takes: Vec<&str> = options.iter().map(|(f, _)| f.as_str()).collect();
            let not_value = if takes.is_empty() {
                String::new()
            } else {
                format!("; and not __fish_prev_arg_in {}", takes.join(" "))
            };
            let _ = writeln!(
                out,
                "complete -c {name} -n '{on}{not_value}' -f -a '(netadm __complete {kind} 2>/dev/null)'"
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_has_its_verbs_options_properties_and_sections() {
        for who in [Personality::Netadm, Personality::Dladm, Personality::Ipadm] {
            let page = man_page(who, "2026-12-01");
            for s in
                ["NAME", "SYNOPSIS", "DESCRIPTION", "VERBS", "EXIT STATUS", "FILES", "EXAMPLES"]
            {
                assert!(
                    page.contains(&format!(".SH \"{s}\"")) || page.contains(&format!(".SH {s}")),
                    "{who:?}: no {s}"
                );
            }
            for sub in verbs(&resolved(who)) {
                let n = sub.get_name();
                let listed =
                    page.contains(&format!(".SS {n}\n")) || page.contains(&format!(".SS \"{n} ("));
                assert!(listed, "{who:?}: no verb {n}");
            }
        }
        let dladm = man_page(Personality::Dladm, "2026-12-01");
        assert!(dladm.contains(".SS show-ether") && dladm.contains("maxbw"), "dladm(8)");
        assert!(!dladm.contains(".SS create-addr"), "dladm(8) has only dladm's verbs");
        assert!(man_page(Personality::Ipadm, "d").contains(".SS \"create-if (create-ip)\""));
        assert!(man_page(Personality::Netadm, "d").contains("\\-\\-json"));
    }

    #[test]
    fn names_are_wanted_where_verbs_take_them() {
        let t = names_wanted(&resolved(Personality::Netadm));
        let find = |v: &str| t.iter().find(|w| w.verb == v).unwrap_or_else(|| panic!("{v}"));
        assert_eq!(find("show-link").positional, Some("links"));
        assert_eq!(find("delete-addr").positional, Some("addrobjs"));
        assert_eq!(find("delete-vnic").positional, Some("vnics"));
        assert_eq!(find("create-vnic").positional, None, "a new name");
        assert_eq!(find("create-if").positional, Some("links"));
        assert!(find("create-vnic").options.contains(&("-l".to_owned(), "links")));
        assert!(find("create-aggr").options.contains(&("-l".to_owned(), "phys")));
        assert!(find("create-addr").options.contains(&("-a".to_owned(), "-")));
        let ipadm = names_wanted(&resolved(Personality::Ipadm));
        assert!(ipadm.iter().any(|w| w.verb == "delete-ip" && w.positional == Some("ifs")));
    }
}

/// The completion layers in real shells, with a stand-in `netadm` on
/// PATH that answers `__complete` as netadmd's names would (the real one
/// is tested against a daemon in `tests/tests/complete.rs`). A shell that
/// is not installed is skipped, except under `CI=true`.
#[cfg(test)]
mod shells {
    use super::*;

    /// A directory with the scripts for `netadm` and the stand-in.
    fn setup() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), "2026-12-01").unwrap();
        let fake = "#!/bin/sh\n[ \"$1\" = __complete ] || exit 1\ncase $2 in\n  links) printf 'i40e0\\ni40e1\\nvnic0\\n' ;;\n  vnics) echo vnic0 ;;\n  addrobjs) echo vnic0/v4 ;;\nesac\n";
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("netadm"), fake).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join("netadm"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        dir
    }

    /// Runs `script` with `shell`, the stand-in first on PATH; its output,
    /// or `None` when the shell is not installed (outside CI).
    fn run(dir: &Path, shell: &str, args: &[&str], script: &str) -> Option<String> {
        let path = format!("{}:{}", dir.join("bin").display(), std::env::var("PATH").unwrap());
        let out = match std::process::Command::new(shell)
            .args(args)
            .arg(script)
            .env("PATH", path)
            .current_dir(dir)
            .output()
        {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and no {shell}");
                eprintln!("skipped: no {shell}");
                return None;
            }
            r => r.unwrap(),
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{shell}: {err}");
        Some(String::from_utf8(out.stdout).unwrap())
    }

    /// What each shell offers after each command line: names where the
    /// verb takes one, clap's verbs and options elsewhere.
    const CASES: &[(&str, &str)] = &[
        ("netadm show-link ", "i40e0 i40e1 vnic0"),
        ("netadm show-link i40", "i40e0 i40e1"),
        ("netadm create-vnic -l ", "i40e0 i40e1 vnic0"),
        ("netadm delete-vnic ", "vnic0"),
        ("netadm --bus session delete-addr ", "vnic0/v4"),
        ("netadm show-li", "show-link show-linkprop"),
    ];

    #[test]
    fn bash_completes_names_from_netadmd_and_verbs_from_clap() {
        let dir = setup();
        let script = "source completions/bash/netadm\n\
            t() { read -ra COMP_WORDS <<< \"$1\"; [[ $1 == *' ' ]] && COMP_WORDS+=(''); \
            COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); \
            _netadm_names netadm \"${COMP_WORDS[COMP_CWORD]}\" \"${COMP_WORDS[COMP_CWORD-1]}\"; \
            echo \"${COMPREPLY[*]}\"; }\n";
        let lines: String = CASES.iter().map(|(l, _)| format!("t '{l}'\n")).collect();
        let Some(out) = run(dir.path(), "bash", &["-c"], &format!("{script}{lines}")) else {
            return;
        };
        for ((line, want), got) in CASES.iter().zip(out.lines()) {
            assert_eq!(got, *want, "bash: {line:?}");
        }
    }

    #[test]
    fn fish_completes_names_from_netadmd_and_verbs_from_clap() {
        let dir = setup();
        let lines: String = CASES
            .iter()
            .map(|(l, _)| format!("echo (complete -C '{l}' | string replace -r '\\t.*' '')\n"))
            .collect();
        let script = format!("source completions/fish/netadm.fish\n{lines}");
        let Some(out) = run(dir.path(), "fish", &["-c"], &script) else { return };
        for ((line, want), got) in CASES.iter().zip(out.lines()) {
            assert_eq!(got, *want, "fish: {line:?}");
        }
    }

    /// zsh's completion system needs a terminal; its builtins are stood in
    /// for (`compadd` prints what it is given, clap's function says so), so
    /// this checks our layer's choice and that the script parses.
    #[test]
    fn zsh_completes_names_from_netadmd_and_leaves_the_rest_to_clap() {
        let dir = setup();
        let script = "compdef() { :; }\n\
            compadd() { [[ $1 == -a ]] && print -r -- ${(P)2} || print -r -- \"$@\"; }\n\
            source completions/zsh/_netadm\n\
            _netadm_clap() { print -r -- clap; }\n\
            t() { words=(${=1}); [[ $1 == *' ' ]] && words+=(''); CURRENT=${#words}; _netadm; }\n";
        let mut cases: Vec<(&str, &str)> = CASES[..5].to_vec();
        cases.push(("netadm show-li", "clap"));
        cases.push(("netadm show-link -", "clap"));
        let lines: String = cases.iter().map(|(l, _)| format!("t '{l}'\n")).collect();
        let Some(out) = run(dir.path(), "zsh", &["-f", "-c"], &format!("{script}{lines}")) else {
            return;
        };
        let want: Vec<&str> = cases
            .iter()
            .map(|(l, w)| if l.ends_with("i40") { "i40e0 i40e1 vnic0" } else { w })
            .collect();
        let got: Vec<&str> = out.lines().collect();
        assert_eq!(got, want, "zsh (compadd filters by prefix itself: all names are given)");
    }
}
