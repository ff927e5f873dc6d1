//! The manager interface `org.netadm.Netadm1`, declared once: the grammar
//! of [`interface!`](crate::interface!), which holds it.
//!
//! [`interface!`](crate::interface!) lists every method, property and
//! signal of the interface in the order the daemon serves them (the order
//! of `docs/dbus/org.netadm.Netadm1.xml`). Each user of the contract hands
//! it a macro of its own, which receives the whole list and makes what that
//! user needs of it:
//!
//! - this crate: the client proxy, [`NetadmProxy`](crate::NetadmProxy);
//! - `netadmd` (`daemon/src/service.rs`): the `#[zbus::interface]` methods,
//!   each the skeleton of its class around the core function of the same
//!   name;
//! - `netadm` (`cli/src/dispatch.rs`): the dispatch of each verb the table
//!   names, its bus arguments read from the verb's command line by name.
//!
//! # The entries
//!
//! ```text
//! /// Doc comment (the proxy method's).
//! CLASS rust_name(arg: WIRE_TYPE, ...) -> RETURN = "VERB";
//! ```
//!
//! - `CLASS` is who may call it: `read` (anyone: the `Show*` methods) or
//!   `mutate` (root and the daemon's administrator group, as
//!   `netadmd`'s authorizer decides; a mutation reports progress, is timed
//!   in the metrics and updates the link objects).
//! - `rust_name` is the method's name in Rust; on the bus it is the same
//!   in CamelCase, as zbus spells it (`set_link_prop` is `SetLinkProp`).
//!   The daemon calls the core function of that name unless its list of
//!   exceptions says otherwise.
//! - The arguments' names are the bus's (introspection shows them); their
//!   wire types are one word each: `String` (`s`), `bool` (`b`), `u16`
//!   (`q`), `u32` (`u`), `u64` (`t`), [`Links`](crate::Links) (`as` of link
//!   or port names), [`PropNames`](crate::PropNames) (`as` of property
//!   names) and [`Props`](crate::Props) (`a{ss}` of property assignments).
//! - `RETURN` is what it answers with (an error is always possible).
//! - `VERB` is the netadm verb the method serves (for a mutation, also the
//!   operation's name in the daemon's logs, progress signals and metrics):
//!   a subcommand of `netadm`, which then dispatches it from this table
//!   unless it writes that verb out itself; any other wording
//!   (`show-link NAME`, `cut-cable, plug-cable`) says which form of which
//!   verbs the method serves.
//!
//! Properties are `name: Type;` and signals `name(arg: Type, ...);`, in
//! Rust types (both sides borrow a signal's strings).
//!
//! # A released member never changes
//!
//! A method, property or signal once released keeps its name, its
//! arguments and what it answers: clients built against it must keep
//! working. New fields come through a new member beside it (`ShowIfEx`
//! answers `ShowIf`'s rows with `drift`; `ShowIf` keeps its first shape,
//! made from the new rows by `IfInfo::v1`); removing a member, or changing it in
//! place, needs a new interface name (`Netadm2`). Every release's
//! introspection XML is kept in `docs/dbus/releases/`, and
//! `tests/tests/dbus_compat.rs` fails when a member of any of them is
//! served differently or not at all.

/// Hands the whole `org.netadm.Netadm1` interface, in the order it is
/// served, to the macro `$then` (see the [module](mod@crate::interface)
/// documentation for the grammar).
///
/// Adding a method is one entry here, in the place where the daemon should
/// serve it, and the core function of the same name; see `cli/README.md`
/// for the rest of a new verb.
#[macro_export]
macro_rules! interface {
    ($then:ident) => { $then! {
        methods {
            /// Physical links.
            read show_phys() -> Vec<PhysInfo> = "show-phys";
            /// The factory MAC address slots of physical links, and who
            /// uses each.
            read show_phys_mac() -> Vec<PhysMacInfo> = "show-phys -m";
            /// Where physical links' devices are.
            read show_phys_loc() -> Vec<PhysLocInfo> = "show-phys -L";
            /// Ethernet settings of physical links (`link`: one, or every
            /// one when empty): what each runs at, and with `extended` also
            /// what it can run at, advertises and its peer advertises.
            read show_ether(link: String, extended: bool) -> Vec<EtherInfo> = "show-ether";
            /// All datalinks.
            read show_link() -> Vec<LinkInfo> = "show-link";
            /// The datalinks named, each at the cost of its own lookup, not of
            /// listing every link; `NotFound` names the first that is no link.
            read show_link_named(names: Links) -> Vec<LinkInfo> = "show-link NAME";
            /// Renames a link.
            mutate rename_link(old: String, new: String, temporary: bool) -> OpResult
                = "rename-link";
            /// Creates an aggregation; `mac` empty means the first port's.
            mutate create_aggr(
                name: String, ports: Links, policy: String, lacp_mode: String, lacp_timer: String,
                mac: String, temporary: bool
            ) -> OpResult = "create-aggr";
            /// Changes an aggregation's policy, LACP mode/timer or MAC; an empty
            /// argument leaves that setting as it is.
            mutate modify_aggr(
                name: String, policy: String, lacp_mode: String, lacp_timer: String, mac: String,
                temporary: bool
            ) -> OpResult = "modify-aggr";
            /// Adds ports to an aggregation.
            mutate add_aggr(name: String, ports: Links, temporary: bool) -> OpResult = "add-aggr";
            /// Removes ports from an aggregation.
            mutate remove_aggr(name: String, ports: Links, temporary: bool) -> OpResult
                = "remove-aggr";
            /// Deletes an aggregation.
            mutate delete_aggr(name: String, temporary: bool) -> OpResult = "delete-aggr";
            /// Aggregations.
            read show_aggr() -> Vec<AggrInfo> = "show-aggr";
            /// Creates a VNIC. `mac`: `auto`, `factory`, `random` or a MAC address;
            /// `vid` 0 for none; `props` are link properties to set.
            mutate create_vnic(
                name: String, over: String, mac: String, vid: u16, props: Props, temporary: bool
            ) -> OpResult = "create-vnic";
            /// Deletes a VNIC.
            mutate delete_vnic(name: String, temporary: bool) -> OpResult = "delete-vnic";
            /// VNICs.
            read show_vnic() -> Vec<VnicInfo> = "show-vnic";
            /// The VNICs named, each at the cost of its own lookup; `NotFound`
            /// names the first that is no VNIC.
            read show_vnic_named(names: Links) -> Vec<VnicInfo> = "show-vnic NAME";
            /// Creates VLAN `vid` (1-4094) over `over` as link `name`.
            mutate create_vlan(name: String, over: String, vid: u16, temporary: bool) -> OpResult
                = "create-vlan";
            /// Deletes a VLAN link.
            mutate delete_vlan(name: String, temporary: bool) -> OpResult = "delete-vlan";
            /// VLAN links.
            read show_vlan() -> Vec<VlanInfo> = "show-vlan";
            /// Creates etherstub `name`.
            mutate create_etherstub(name: String, temporary: bool) -> OpResult = "create-etherstub";
            /// Deletes an etherstub (refused while VNICs are over it).
            mutate delete_etherstub(name: String, temporary: bool) -> OpResult = "delete-etherstub";
            /// Etherstubs.
            read show_etherstub() -> Vec<EtherstubInfoV1> = "show-etherstub (D-Bus API 1.0)";
            /// Etherstubs, with the kind of switch each is.
            read show_etherstub_ex() -> Vec<EtherstubInfo> = "show-etherstub";
            /// Sets link properties.
            mutate set_link_prop(link: String, props: Props, temporary: bool) -> OpResult
                = "set-linkprop";
            /// Resets link properties to their defaults (all settable ones when
            /// `names` is empty).
            mutate reset_link_prop(link: String, names: PropNames, temporary: bool) -> OpResult
                = "reset-linkprop";
            /// Link properties of `link` (every link when empty), limited to
            /// `names` when not empty.
            read show_link_prop(link: String, names: PropNames) -> Vec<PropInfo> = "show-linkprop";
            /// Creates an IP interface over a link.
            mutate create_if(name: String, temporary: bool) -> OpResult = "create-if";
            /// Deletes an IP interface and its addresses.
            mutate delete_if(name: String, temporary: bool) -> OpResult = "delete-if";
            /// Makes an IP interface's kernel device anew as configured (MAC,
            /// MTU, up, addresses), whatever was done to it.
            mutate refresh_if(name: String) -> OpResult = "refresh-if";
            /// Sets interface properties of protocol `proto` (`ipv4`, `ipv6`).
            mutate set_if_prop(name: String, proto: String, props: Props, temporary: bool)
                -> OpResult = "set-ifprop";
            /// Resets interface properties of `proto` to their defaults.
            mutate reset_if_prop(name: String, proto: String, names: PropNames, temporary: bool)
                -> OpResult = "reset-ifprop";
            /// Interface properties of `name` (every interface when empty) and
            /// protocol `proto` (both when empty), limited to `names` when not
            /// empty.
            read show_if_prop(name: String, proto: String, names: PropNames) -> Vec<IfPropInfo>
                = "show-ifprop";
            /// Sets address properties of a static address object.
            mutate set_addr_prop(addrobj: String, props: Props, temporary: bool) -> OpResult
                = "set-addrprop";
            /// Resets address properties to their defaults.
            mutate reset_addr_prop(addrobj: String, names: PropNames, temporary: bool) -> OpResult
                = "reset-addrprop";
            /// Address properties of `addrobj` (every static one when empty),
            /// limited to `names` when not empty.
            read show_addr_prop(addrobj: String, names: PropNames) -> Vec<AddrPropInfo>
                = "show-addrprop";
            /// Sets protocol properties of `proto` (netadmd's network
            /// namespace's).
            mutate set_prop(proto: String, props: Props, temporary: bool) -> OpResult = "set-prop";
            /// Resets protocol properties of `proto` to the kernel's defaults.
            mutate reset_prop(proto: String, names: PropNames, temporary: bool) -> OpResult
                = "reset-prop";
            /// Protocol properties of `proto` (all when empty), limited to
            /// `names` when not empty.
            read show_prop(proto: String, names: PropNames) -> Vec<ProtoPropInfo> = "show-prop";
            /// Brings a disabled IP interface back from its persistent
            /// configuration, with its addresses (running system only).
            mutate enable_if(name: String) -> OpResult = "enable-if";
            /// Removes a persistent IP interface and its addresses from the
            /// running system, keeping its persistent configuration.
            mutate disable_if(name: String) -> OpResult = "disable-if";
            /// IP interfaces, as first published (`a(ssssss)`: no drift).
            read show_if() -> Vec<IfInfoV1> = "show-if (D-Bus API 1.0)";
            /// IP interfaces, with how each kernel device drifted.
            read show_if_ex() -> Vec<IfInfo> = "show-if";
            /// Creates an address object; `kind` is `static` (`addr` is
            /// `ADDRESS/PREFIX`), `dhcp` or `addrconf` (`addr` empty).
            mutate create_addr(addrobj: String, kind: String, addr: String, temporary: bool)
                -> OpResult = "create-addr";
            /// Deletes an address object.
            mutate delete_addr(addrobj: String, temporary: bool) -> OpResult = "delete-addr";
            /// Marks a static address up: back in the kernel.
            mutate up_addr(addrobj: String, temporary: bool) -> OpResult = "up-addr";
            /// Marks a static address down: kept in the configuration, removed
            /// from the kernel.
            mutate down_addr(addrobj: String, temporary: bool) -> OpResult = "down-addr";
            /// Address objects, as first published (`a(ssss)`: no flags).
            read show_addr() -> Vec<AddrInfoV1> = "show-addr (D-Bus API 1.0)";
            /// Address objects, with ipadm's CURRENT and PERSISTENT flags.
            read show_addr_ex() -> Vec<AddrInfo> = "show-addr";
            /// Starts a traffic generator on `link`: `rate` frames per second (0:
            /// as fast as it takes them) of `size` bytes over `flows` flows.
            mutate start_traffic(link: String, rate: u64, size: u32, flows: u32) -> OpResult
                = "start-traffic";
            /// Stops the traffic generator on `link`; its books stay readable.
            mutate stop_traffic(link: String) -> OpResult = "stop-traffic";
            /// Cuts (`up` false) or plugs back in (`up` true) a port's wire; for a
            /// cable, both ends lose or regain carrier.
            mutate set_carrier(link: String, up: bool) -> OpResult = "cut-cable, plug-cable";
            /// Traffic streams and their books.
            read show_traffic() -> Vec<TrafficInfo> = "show-traffic";
            /// Traffic counters of every physical link and aggregation.
            read show_stats() -> Vec<LinkStats> = "show-link -s, show-phys -s";
            /// Traffic counters of every link but etherstubs: a physical
            /// link's and an aggregation's from their ports, a VNIC's or
            /// VLAN's from its device (zero while it has none).
            read show_link_stats() -> Vec<LinkStats> = "dlstat";
            /// Adds flow `name` on `link`: its traffic that matches `attrs`
            /// (transport, local_ip, remote_ip, local_port, remote_port,
            /// dsfield), governed by `props` (maxbw, priority).
            mutate add_flow(name: String, link: String, attrs: Props, props: Props, temporary: bool)
                -> OpResult = "add-flow";
            /// Removes flow `name`, or (`name` empty) every flow on `link`.
            mutate remove_flow(name: String, link: String, temporary: bool) -> OpResult
                = "remove-flow";
            /// Sets flow properties.
            mutate set_flow_prop(name: String, props: Props, temporary: bool) -> OpResult
                = "set-flowprop";
            /// Resets flow properties to their defaults (all when `names` is
            /// empty).
            mutate reset_flow_prop(name: String, names: PropNames, temporary: bool) -> OpResult
                = "reset-flowprop";
            /// Flow `name` (every flow when empty), on `link` only when given.
            read show_flow(name: String, link: String) -> Vec<FlowInfo> = "show-flow";
            /// The properties of flow `name` (every flow's when empty, on
            /// `link` only when given), limited to `names` when not empty.
            read show_flow_prop(name: String, link: String, names: PropNames) -> Vec<FlowPropInfo>
                = "show-flowprop";
            /// What each flow carried, in its link's sense.
            read show_flow_stats() -> Vec<FlowStatsV1> = "flowstat (D-Bus API 0.3)";
            /// What each flow carried, in its link's sense, and what its
            /// maxbw dropped on arrival.
            read show_flow_stats_ex() -> Vec<FlowStats> = "flowstat";
            /// What link protection dropped (by reason) and let through on
            /// each VNIC it guards.
            read show_protect_stats() -> Vec<ProtectStats> = "show-link -s (protection)";
            /// The persistent configuration (the running one with `running`)
            /// as one document in the `links.toml` schema; `format` is `toml`
            /// (or empty) or `json`.
            read show_config(running: bool, format: String) -> String = "show-config";
            /// Makes the configuration `document` (TOML or JSON, the
            /// `links.toml` schema), as one operation; with `dry_run`, only
            /// plans it. With `confirm_timeout_s` > 0, arms a checkpoint that
            /// rolls back unless `Confirm` comes in time.
            mutate apply(document: String, dry_run: bool, confirm_timeout_s: u32) -> ApplyResult
                = "apply";
            /// Keeps what the last `Apply` with a confirm timeout made.
            mutate confirm() -> OpResult = "confirm";
            /// Rolls back to the armed checkpoint now.
            mutate rollback() -> OpResult = "rollback";
            /// Recent mutating commands and their timings, oldest first.
            read show_history() -> Vec<HistoryEntry> = "show-history";
            /// Selects the ring lifecycle strategy: `batched`, `sequential`,
            /// `legacy` or `legacy@HZ` (for comparisons such as `netadm demo`).
            mutate set_strategy(strategy: String) -> OpResult = "set-strategy";
        }
        properties {
            /// The ring lifecycle strategy in use.
            strategy: String;
            /// The daemon's version.
            version: String;
        }
        signals {
            /// Progress of a long operation started by bus client `caller`:
            /// `done` of `total` units in `phase`.
            progress(caller: &str, op: &str, phase: &str, done: u32, total: u32);
        }
    } };
}
