//! `netadm-bench`: netadm's benchmarks, each measured side by side in one
//! run, printed as a table (or one JSON object with `--json`).
//!
//! ```text
//! netadm-bench rings [--json] [--rings N] [--legacy-rings N] [--tick-hz HZ]
//! netadm-bench datapath [--json] [--frames N]
//! netadm-bench mtu [--json] [--changes N] [--sequential-changes N] [--rings N] [--rate PPS]
//! netadm-bench kernel [--json] [--seconds N] [--toggle-seconds N] [--pings N]   (root)
//! netadm-bench scale [--json] [--sizes N,N,...] [--samples N]
//! netadm-bench qos [--json] [--speed MBPS] [--seconds N]
//! netadm-bench apply [--json] [--rounds N] [--kernel]
//! netadm-bench kernel-links [--json] [--vnics N] [--addrs N] [--rounds N] [--sizes N,N,...] [--samples N]   (root)
//! netadm-bench protection [--json] [--frames N] [--rounds N] [--seconds N] [--kernel]
//! netadm-bench guest [--json] [--changes N] [--period S] [--modes static,lacp]   (root)
//! ```

/// Declares a benchmark's options, `Opts`: `json` (`--json`) and the
/// fields given, each read from the flag of its name (`--toggle-seconds`
/// for `toggle_seconds`) and the default given; `Opts::read` reads a
/// command line into them (see [`flags`]).
macro_rules! opts {
    ($bench:literal { $($field:ident: $ty:ty = $default:expr),+ $(,)? }) => {
        #[doc = concat!("Options of the `", $bench, "` benchmark.")]
        pub struct Opts {
            json: bool,
            $($field: $ty,)+
        }

        impl Opts {
            /// Reads `args`: the flags given, the defaults for the rest.
            fn read(args: &[String]) -> Result<Self, String> {
                let mut o = Opts { json: false, $($field: $default,)+ };
                let known: &mut [(&str, &mut dyn crate::Flag)] =
                    &mut [$((stringify!($field), &mut o.$field),)+];
                let json = crate::flags($bench, args, known)?;
                o.json = json;
                Ok(o)
            }
        }
    };
}

mod apply;
mod datapath;
mod floor;
mod guest;
mod kernel;
mod kernel_links;
mod mtu;
mod protection;
mod qos;
mod rings;
mod scale;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: netadm-bench rings [--json] [--rings N] [--legacy-rings N] [--tick-hz HZ]
       netadm-bench datapath [--json] [--frames N]
       netadm-bench mtu [--json] [--changes N] [--sequential-changes N] [--rings N] [--rate PPS]
       netadm-bench kernel [--json] [--seconds N] [--toggle-seconds N] [--pings N] [--rounds N]   (as root)
       netadm-bench scale [--json] [--sizes N,N,...] [--samples N]
       netadm-bench qos [--json] [--speed MBPS] [--seconds N]
       netadm-bench apply [--json] [--rounds N] [--kernel]
       netadm-bench kernel-links [--json] [--vnics N] [--addrs N] [--rounds N] [--sizes N,N,...] [--samples N]   (as root)
       netadm-bench protection [--json] [--frames N] [--rounds N] [--seconds N] [--kernel]
       netadm-bench guest [--json] [--changes N] [--period S] [--modes static,lacp]   (as root)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("rings") => rings::Opts::parse(&args[1..]).and_then(rings::run),
        Some("datapath") => datapath::Opts::parse(&args[1..]).and_then(datapath::run),
        Some("mtu") => mtu::Opts::parse(&args[1..]).and_then(mtu::run),
        Some("kernel") => kernel::Opts::parse(&args[1..]).and_then(kernel::run),
        Some("scale") => scale::Opts::parse(&args[1..]).and_then(scale::run),
        Some("qos") => qos::Opts::parse(&args[1..]).and_then(qos::run),
        Some("apply") => apply::Opts::parse(&args[1..]).and_then(apply::run),
        Some("kernel-links") => kernel_links::Opts::parse(&args[1..]).and_then(kernel_links::run),
        Some("protection") => protection::Opts::parse(&args[1..]).and_then(protection::run),
        Some("guest") => guest::Opts::parse(&args[1..]).and_then(guest::run),
        // Not a benchmark: the `kernel` benchmark's floor, run by it.
        Some("floor-forwarder") => floor::forwarder(&args[1..]),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => Err(format!("expected a benchmark name\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("netadm-bench: {e}");
            ExitCode::from(2)
        }
    }
}

/// A flag's value, read from its text.
trait Flag {
    /// Sets it from `text`; `Err` if `text` is not one.
    fn set(&mut self, text: &str) -> Result<(), ()>;
}

impl<T: std::str::FromStr> Flag for T {
    fn set(&mut self, text: &str) -> Result<(), ()> {
        *self = text.parse().map_err(drop)?;
        Ok(())
    }
}

/// Reads the command line `args` of benchmark `bench`: `--json` (the
/// result) and, for each `(field, value)` of `known`, the flag `--FIELD`
/// (`_` written `-`) with the value after it. An unknown flag, or one
/// without a valid value, is an error naming it.
fn flags(
    bench: &str,
    args: &[String],
    known: &mut [(&str, &mut dyn Flag)],
) -> Result<bool, String> {
    let mut json = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--json" {
            json = true;
            continue;
        }
        let flag = |field: &str| format!("--{}", field.replace('_', "-"));
        let Some((_, slot)) = known.iter_mut().find(|(field, _)| flag(field) == *a) else {
            return Err(format!("{bench}: unknown option {a:?}"));
        };
        let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        slot.set(v).map_err(|()| format!("{a}: invalid value {v:?}"))?;
    }
    Ok(json)
}

/// Fails, saying what is missing and how to install it, unless this runs
/// as root (benchmark `bench` makes `what`) with each `(tool, Debian
/// package)` of `tools` on PATH.
fn root_with(bench: &str, what: &str, tools: &[(&str, &str)]) -> Result<(), String> {
    if !netadm_testkit::is_root() {
        return Err(format!(
            "{bench}: must run as root: it makes {what} (try: sudo netadm-bench {bench})"
        ));
    }
    let missing: Vec<&(&str, &str)> =
        tools.iter().filter(|(t, _)| !netadm_testkit::have(t)).collect();
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|(t, _)| *t).collect();
        let pkgs: Vec<&str> = missing.iter().map(|(_, p)| *p).collect();
        return Err(format!(
            "{bench}: missing {} (apt-get install {})",
            names.join(", "),
            pkgs.join(" ")
        ));
    }
    Ok(())
}

/// Parses the value following flag `name`.
fn value<T: std::str::FromStr>(name: &str, v: Option<&String>) -> Result<T, String> {
    v.ok_or_else(|| format!("{name} needs a value"))?
        .parse()
        .map_err(|_| format!("{name}: invalid value {:?}", v.unwrap()))
}

/// The binaries `netadmd` and `netadm` beside this one; `bench` names the
/// benchmark asking, for the error.
fn binaries(bench: &str) -> Result<(PathBuf, PathBuf), String> {
    let find = |name: &str| {
        let p = netadm_testkit::bin_path(name);
        p.is_file().then(|| p.clone()).ok_or_else(|| {
            format!(
                "{bench}: {name} not found at {} (it must sit beside netadm-bench); \
                 build it with `cargo build --release --workspace`",
                p.display()
            )
        })
    };
    Ok((find("netadmd")?, find("netadm")?))
}
