//! The verbs `netadm` dispatches from the interface's declaration
//! (`netadm_dbus::interface!`): every method whose verb is a subcommand,
//! unless `main.rs` writes that verb out itself.
//!
//! A method's bus arguments come from its verb's command line by name: the
//! clap id of each is the argument's name (a field named so, or one with
//! `#[arg(id = "...")]`), and the argument's wire type says how to read it:
//!
//! | wire type | from the command line |
//! | --- | --- |
//! | `String` | the value, or empty when the option was not given |
//! | `bool` | a flag (`-t`: `temporary`) |
//! | `u16`, `u32`, `u64` | the value (with its default) |
//! | `Links` | the values, as given (`-l PORT -l PORT`) |
//! | `PropNames` | `-p PROP,...` lists, split and checked |
//! | `Props` | `-p PROP=VAL,...` lists, split and checked |
//!
//! A read without arguments fetches everything and keeps the one the
//! verb's `name` names (`show-vlan VLAN`); a read with arguments prints
//! what the daemon answered. Both print through [`Ctx::show`]. A mutation
//! runs through [`Ctx::mutate`], its summary naming its first argument.

use clap::{ArgMatches, Command};

use crate::error::CliError;
use crate::show::pick_rows;
use crate::{Ctx, assignments, prop_names, refs};

/// Binds bus argument `$arg` of wire type `$ty` from the verb's matches
/// `$m`, as the call borrows it.
macro_rules! held {
    ($m:ident, $arg:ident, String) => {
        let $arg = $m.get_one::<String>(stringify!($arg)).map_or("", String::as_str);
    };
    ($m:ident, $arg:ident, bool) => {
        let $arg = $m.get_flag(stringify!($arg));
    };
    ($m:ident, $arg:ident, Links) => {
        let $arg: Vec<&str> = strings($m, stringify!($arg)).collect();
        let $arg = &$arg[..];
    };
    ($m:ident, $arg:ident, PropNames) => {
        let $arg = prop_names(&lists($m, stringify!($arg)))?;
        let $arg = refs(&$arg);
        let $arg = &$arg[..];
    };
    ($m:ident, $arg:ident, Props) => {
        let $arg = assignments(&lists($m, stringify!($arg)))?;
    };
    ($m:ident, $arg:ident, $number:ty) => {
        let $arg = *$m.get_one::<$number>(stringify!($arg)).expect("the option has a default");
    };
}

/// What a mutation's summary names: its first argument (rename-link: both
/// names; a mutation without arguments acts on the checkpoint).
macro_rules! subject {
    (rename_link $old:ident $new:ident $($rest:ident)*) => {
        ($old, format!("{} -> {}", $old, $new))
    };
    ($name:ident $first:ident $($rest:ident)*) => {
        ($first, $first.to_owned())
    };
    ($name:ident) => {
        ("checkpoint", "checkpoint".to_owned())
    };
}

/// One method: with `run`, runs it and returns what it prints when `$v` is
/// its verb; with `list`, adds it to the list the tests check.
macro_rules! verb {
    // Written out in main.rs: two verbs for one method, a file to read,
    // a document to print.
    ($mode:ident $ctx:tt mutate set_carrier $($rest:tt)*) => {};
    ($mode:ident $ctx:tt mutate apply $($rest:tt)*) => {};
    ($mode:ident $ctx:tt read show_config $($rest:tt)*) => {};
    // The first published shapes, for other clients: show-if, show-addr,
    // show-etherstub and flowstat call their `Ex` methods.
    ($mode:ident $ctx:tt read show_if() $($rest:tt)*) => {};
    ($mode:ident $ctx:tt read show_addr() $($rest:tt)*) => {};
    ($mode:ident $ctx:tt read show_etherstub() $($rest:tt)*) => {};
    ($mode:ident $ctx:tt read show_flow_stats() $($rest:tt)*) => {};
    (
        list [$list:ident]
        $class:ident $name:ident($($arg:ident: $ty:tt),*) -> $ret:ty = $verb:literal
    ) => {
        let args: &[(&str, &str)] = &[$((stringify!($arg), stringify!($ty))),*];
        $list.push((stringify!($class), $verb, args));
    };
    (run [$c:ident, $v:ident, $m:ident, $cmd:ident] read $name:ident() -> $ret:ty = $verb:literal) => {
        if $v == $verb {
            let rows = async {
                let rows = $c.proxy.$name().await.map_err(|e| $c.err(e))?;
                pick_rows(rows, $m.try_get_one::<String>("name").ok().flatten().map(String::as_str))
            };
            return Some($c.show($c.format($m, $cmd), rows).await);
        }
    };
    (
        run [$c:ident, $v:ident, $m:ident, $cmd:ident]
        read $name:ident($($arg:ident: $ty:tt),+) -> $ret:ty = $verb:literal
    ) => {
        if $v == $verb {
            let rows = async {
                $(held!($m, $arg, $ty);)+
                $c.proxy.$name($($arg),+).await.map_err(|e| $c.err(e))
            };
            return Some($c.show($c.format($m, $cmd), rows).await);
        }
    };
    (
        run [$c:ident, $v:ident, $m:ident, $cmd:ident]
        mutate $name:ident($($arg:ident: $ty:tt),*) -> $ret:ty = $verb:literal
    ) => {
        if $v == $verb {
            return Some(async {
                $(held!($m, $arg, $ty);)*
                let (object, label) = subject!($name $($arg)*);
                $c.mutate(object, &label, || $c.proxy.$name($($arg),*)).await
            }.await);
        }
    };
}

/// [`dispatch`], from the declaration.
macro_rules! dispatch {
    (methods { $($(#[$d:meta])* $class:ident $name:ident ($($arg:ident: $ty:tt),*)
        -> $ret:ty = $verb:literal;)* } $($rest:tt)*) => {
        /// Runs verb `verb` (its matches `m`, its definition `cmd`) when the
        /// declaration serves it; `None` when it does not.
        pub async fn dispatch(
            ctx: &Ctx,
            verb: &str,
            m: &ArgMatches,
            cmd: &Command,
        ) -> Option<Result<String, CliError>> {
            $(verb!(run [ctx, verb, m, cmd] $class $name($($arg: $ty),*) -> $ret = $verb);)*
            None
        }

        /// The methods [`dispatch`] serves: class, verb and arguments
        /// (name, wire type).
        #[cfg(test)]
        fn served() -> Vec<(&'static str, &'static str, &'static [(&'static str, &'static str)])> {
            let mut list = Vec::new();
            $(verb!(list [list] $class $name($($arg: $ty),*) -> $ret = $verb);)*
            list
        }
    };
}

netadm_dbus::interface!(dispatch);

/// The values of option `id`, none when it was not given.
fn strings<'a>(m: &'a ArgMatches, id: &str) -> impl Iterator<Item = &'a str> {
    m.get_many::<String>(id).into_iter().flatten().map(String::as_str)
}

/// The `-p` lists of option `id`, as given.
fn lists(m: &ArgMatches, id: &str) -> Vec<String> {
    strings(m, id).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use std::any::TypeId;

    use clap::CommandFactory;

    use super::served;
    use crate::Cli;

    /// Every method whose verb is a subcommand finds each of its arguments
    /// on that verb's command line, under its name, of the type its wire
    /// type is read as; every read prints through the show options.
    #[test]
    fn each_argument_is_on_its_verbs_command_line() {
        // Built: each verb's options are deferred until then.
        let mut cli = Cli::command();
        cli.build();
        let mut verbs = 0;
        for (class, verb, args) in served() {
            let Some(cmd) = cli.find_subcommand(verb) else {
                // `show-link NAME`, `cut-cable, plug-cable`: main.rs's.
                let first = verb.split([' ', ',']).next().unwrap();
                assert!(cli.find_subcommand(first).is_some(), "{verb}: no verb {first}");
                continue;
            };
            verbs += 1;
            let arg = |id: &str| {
                cmd.get_arguments()
                    .find(|a| a.get_id() == id)
                    .unwrap_or_else(|| panic!("{verb} has no argument {id}"))
            };
            for (name, ty) in args {
                let want = match *ty {
                    "bool" => TypeId::of::<bool>(),
                    "u16" => TypeId::of::<u16>(),
                    "u32" => TypeId::of::<u32>(),
                    "u64" => TypeId::of::<u64>(),
                    _ => TypeId::of::<String>(),
                };
                assert!(arg(name).get_value_parser().type_id() == want, "{verb} {name}: not {ty}");
            }
            if class == "read" {
                assert!(arg("parsable").get_value_parser().type_id() == TypeId::of::<bool>());
                assert!(arg("fields").get_value_parser().type_id() == TypeId::of::<String>());
            }
            if class == "read" && args.is_empty() {
                if let Some(name) = cmd.get_arguments().find(|a| a.get_id() == "name") {
                    assert!(name.is_positional(), "{verb}: its name is the positional");
                }
            }
        }
        assert!(verbs > 40, "only {verbs} methods have verbs");
    }
}
