//! What netadm answers: each answer's fields, listed once.
//!
//! A verb's report, the history, an apply's plan and the rows of the
//! `show-*` verbs are made by `netadm-core` as its own types and carried
//! on D-Bus as `netadm-dbus`'s; netadmd converts one to the other. All
//! three are made from this one list by [`answers!`]: a field is added,
//! documented and converted in one place. The bus's types are the D-Bus
//! contract (`docs/dbus`): a field of an answer a released method carries
//! is never changed or removed; a new field goes to a new method.

/// Calls macro `$make` once for every answer, as
///
/// ```text
/// [#[doc = ...] ...] CoreName => BusName [derives besides Debug, Clone, PartialEq]
///     [[#[doc = ...] ...] field: Type, ...]
/// ```
///
/// Field types name other answers by their core names; a crate that
/// makes the bus's types aliases those names to its own.
#[macro_export]
macro_rules! answers {
    ($make:ident) => {
        $crate::answers! { @each $make
            /// What a mutating call did and where its time went.
            Report => OpResult [Default, Eq] {
                /// The operation, e.g. `create-aggr`.
                op: String,
                /// Wall time in the daemon, µs.
                total_us: u64,
                /// Phases in order: (name, µs).
                phases: Vec<(String, u64)>,
                /// Counts: rings_started, rings_stopped, dma_allocated, dma_freed, ...
                counts: std::collections::BTreeMap<String, u64>,
                /// Notes for the operator (e.g. "no kernel device was made").
                notes: Vec<String>,
            }

            /// A recent mutating command and its timing (`show-history`).
            HistoryEntry => HistoryEntry [Eq] {
                /// Sequence number since the daemon started.
                seq: u64,
                /// Unix time in milliseconds when it started.
                time_ms: u64,
                /// The operation and its main argument, e.g. `create-aggr aggr0`.
                command: String,
                /// Whether it succeeded.
                ok: bool,
                /// Wall time, µs.
                total_us: u64,
                /// Error kind and message, empty on success.
                error: String,
            }

            /// One step of an apply's plan (`netadm apply`), in the order the
            /// operation does them, with what it costs.
            PlanStep => PlanStep [Default, Eq] {
                /// `config` (an entry of the configuration), `rings` (a port's rings),
                /// `kernel` (a device or address in the kernel) or `persist`.
                kind: String,
                /// What it is about: `vnic v1`, `port i40e0`, `interface v1`, ...
                object: String,
                /// What happens, in words.
                action: String,
                /// Rings stopped.
                rings_stopped: u32,
                /// Rings started.
                rings_started: u32,
                /// Rings restarted with new buffers.
                rings_restarted: u32,
                /// Kernel changes (a device made or removed, an address, an MTU).
                kernel_changes: u32,
            }

            /// What `Apply` did, or with `dry_run` would do.
            ApplyReport => ApplyResult [Default, Eq] {
                /// Whether anything changed (would change): false when the document
                /// is the configuration already.
                changed: bool,
                /// Nothing was changed: the plan only.
                dry_run: bool,
                /// The plan, in order.
                steps: Vec<PlanStep>,
                /// When an armed checkpoint rolls back unless confirmed (ms since the
                /// Unix epoch); 0 if none was armed.
                confirm_deadline_ms: u64,
                /// The operation's timing, as every verb's.
                result: Report,
            }

            /// A physical link (`show-phys`).
            PhysRow => PhysInfo [Eq] {
                /// Link name.
                link: String,
                /// Media, e.g. `Ethernet`.
                media: String,
                /// `up`, `down` or `unknown`.
                state: String,
                /// Speed in Mb/s.
                speed: u64,
                /// `full`, `half` or `unknown`.
                duplex: String,
                /// The device: an emulated port's driver instance (`i40e0`), a
                /// kernel port's interface (`eth0`).
                device: String,
                /// Its driver: `i40e` or `atl1c` (emulated), or the kernel's
                /// (`ixgbe`, `veth`).
                driver: String,
                /// Rings the port has.
                rings: u32,
                /// Rings running now.
                rings_started: u32,
                /// DMA bytes its rings hold.
                dma_bytes: u64,
            }

            /// A factory MAC address slot of a physical link (`show-phys -m`).
            PhysMacRow => PhysMacInfo [Eq] {
                /// Link name.
                link: String,
                /// `primary` (the port's own address), or the number of a factory
                /// address a VNIC holds (`create-vnic -m factory`), from 1.
                slot: String,
                /// The MAC address.
                address: String,
                /// Whether a MAC client uses it.
                inuse: bool,
                /// The client using it (the link, its aggregation or a VNIC), empty
                /// when none.
                client: String,
            }

            /// Where a physical link's device is (`show-phys -L`).
            PhysLocRow => PhysLocInfo [Eq] {
                /// Link name.
                link: String,
                /// Device name.
                device: String,
                /// Its location: a kernel port's bus address (`0000:03:00.0`); empty
                /// where none means anything (an emulated port, a virtual device).
                location: String,
            }

            /// One line of `show-ether`: what a physical link runs at (`current`),
            /// can run at (`capable`), advertises (`adv`) and its peer advertises
            /// (`peeradv`).
            EtherRow => EtherInfo [Eq] {
                /// Link name.
                link: String,
                /// `current`, `capable`, `adv` or `peeradv`.
                ptype: String,
                /// `up`, `down` or `unknown` (`current` only; empty otherwise).
                state: String,
                /// Autonegotiation: `yes`, `no`, or empty where unknown.
                auto: String,
                /// Speeds and duplexes, dladm's way: `40G-f`, `1G-fh,100M-fh`; empty
                /// where unknown.
                speed_duplex: String,
                /// Flow control: `bi`, `tx`, `rx` or `none`; empty where unknown.
                pause: String,
            }

            /// A datalink (`show-link`).
            LinkRow => LinkInfo [Eq] {
                /// Link name.
                link: String,
                /// `phys`, `aggr`, `vnic`, `vlan` or `etherstub`.
                class: String,
                /// MTU.
                mtu: u32,
                /// `up`, `down` or `unknown`.
                state: String,
                /// Links this one is built over (aggregation ports, a VNIC's link).
                over: Vec<String>,
                /// The aggregation this link is a port of, or empty.
                member_of: String,
                /// Whether it is in the persistent configuration.
                persistent: bool,
            }

            /// One port of an aggregation.
            AggrPortRow => AggrPortInfo [Eq] {
                /// Port link name.
                port: String,
                /// Port state: `attached` while its rings run, else `standby`.
                state: String,
                /// Port speed, Mb/s.
                speed: u64,
                /// LACP actor state bits (802.1AX: 0x01 active, 0x02 short timeout,
                /// 0x04 aggregatable, 0x08 sync, 0x10 collecting, 0x20 distributing,
                /// 0x40 defaulted, 0x80 expired); 0 when LACP is off.
                lacp: u8,
            }

            /// An aggregation (`show-aggr`).
            AggrRow => AggrInfo [Eq] {
                /// Link name.
                link: String,
                /// Hash policy, e.g. `L2,L3`.
                policy: String,
                /// Whether the MAC address was fixed with `-u`.
                addr_policy: String,
                /// The aggregation's MAC address.
                mac: String,
                /// `off`, `active` or `passive`.
                lacp_mode: String,
                /// `short` or `long`.
                lacp_timer: String,
                /// Ports.
                ports: Vec<AggrPortRow>,
            }

            /// A VNIC (`show-vnic`).
            VnicRow => VnicInfo [Eq] {
                /// Link name.
                link: String,
                /// The link it is over.
                over: String,
                /// Speed, Mb/s (of the link below).
                speed: u64,
                /// MAC address.
                macaddress: String,
                /// How the MAC was chosen: `auto`, `factory`, `random` or `fixed`.
                macaddrtype: String,
                /// VLAN id, 0 for none.
                vid: u16,
            }

            /// A VLAN link (`show-vlan`).
            VlanRow => VlanInfo [Eq] {
                /// Link name.
                link: String,
                /// VLAN id, 1-4094.
                vid: u16,
                /// The link it is over.
                over: String,
                /// dladm's flags: `f` forced, `i` implicit; `-` where unset.
                flags: String,
            }

            /// An etherstub (`show-etherstub`).
            EtherstubRow => EtherstubInfo [Eq] {
                /// Link name.
                link: String,
                /// `netadm` (netadm's own virtual switch) or `kernel` (a Linux bridge).
                kind: String,
                /// The kernel bridge it is, or empty for netadm's own switch.
                device: String,
            }

            /// One link property (`show-linkprop`).
            PropRow => PropInfo [Eq] {
                /// Link name.
                link: String,
                /// Property name.
                property: String,
                /// `rw` or `r-`.
                perm: String,
                /// Current value (`--` when none).
                value: String,
                /// Default value (`--` when none).
                default: String,
                /// Possible values, e.g. `68-9710` or `on,off`.
                possible: String,
            }

            /// One IP interface property (`show-ifprop`).
            IfPropRow => IfPropInfo [Eq] {
                /// Interface name.
                ifname: String,
                /// Property name, e.g. `mtu`.
                property: String,
                /// Protocol: `ipv4` or `ipv6`.
                proto: String,
                /// `rw`.
                perm: String,
                /// The value the kernel has (the configured one without a kernel
                /// mirror).
                current: String,
                /// The persistent value, empty when none is set.
                persistent: String,
                /// The default value.
                default: String,
                /// Possible values, e.g. `68-9000` or `on,off`.
                possible: String,
            }

            /// One address property (`show-addrprop`).
            AddrPropRow => AddrPropInfo [Eq] {
                /// Address object, `IF/TAG`.
                addrobj: String,
                /// Property name, e.g. `prefixlen`.
                property: String,
                /// `rw` or `r-`.
                perm: String,
                /// Its value.
                current: String,
                /// The persistent value when it differs from the default, else empty.
                persistent: String,
                /// The default value.
                default: String,
                /// Possible values.
                possible: String,
            }

            /// One protocol property (`show-prop`).
            ProtoPropRow => ProtoPropInfo [Eq] {
                /// Protocol: `ipv4`, `ipv6`, `tcp`.
                proto: String,
                /// Property name, e.g. `ttl`.
                property: String,
                /// `rw`.
                perm: String,
                /// The value the kernel has in netadmd's network namespace (the
                /// configured one without a kernel mirror).
                current: String,
                /// The persistent value, empty when none is set.
                persistent: String,
                /// The kernel's default.
                default: String,
                /// Possible values.
                possible: String,
            }

            /// An IP interface (`show-if`).
            IfRow => IfInfo [Eq] {
                /// Interface name (same as its link).
                ifname: String,
                /// `ip`.
                class: String,
                /// `ok` while its link's rings run, else `down`.
                state: String,
                /// Flags in effect, ipadm style (e.g. `bm--------46`).
                current: String,
                /// Whether it is in the persistent configuration (`-46` / `--`).
                persistent: String,
                /// The kernel device mirroring it, or empty when none was made.
                kernel_device: String,
                /// How the kernel device differs from the configuration, when someone
                /// changed it behind netadm's back (state `drifted` or `missing`);
                /// empty when it does not. `RefreshIf` puts it back.
                drift: String,
            }

            /// An address object (`show-addr`).
            AddrRow => AddrInfo [Default, Eq] {
                /// `if/tag`.
                addrobj: String,
                /// `static`.
                r#type: String,
                /// `ok`, or `inaccessible` when its interface is down.
                state: String,
                /// `192.0.2.1/24`.
                addr: String,
                /// ipadm's CURRENT flags: `U` up, `u` unnumbered, `p` private, `t`
                /// temporary, `d` deprecated (`-` where not), e.g. `U----`.
                current: String,
                /// ipadm's PERSISTENT flags: `U` up, `p` private, `d` deprecated;
                /// empty when the object is not persistent.
                persistent: String,
            }

            /// A traffic stream on a link (`show-traffic`).
            TrafficRow => TrafficInfo [] {
                /// The link it is sent from.
                link: String,
                /// Whether the generator is still sending.
                running: bool,
                /// Target rate, frames per second (0: as fast as the link takes).
                rate: u64,
                /// Frame size, bytes.
                size: u32,
                /// Flows.
                flows: u32,
                /// Frames the link accepted. The generator discards nothing: a frame
                /// the link does not take (ring full, senders paused, link down) is held
                /// and handed over later, so nothing it built is left out of `lost`.
                sent: u64,
                /// Distinct frames received back (reflector) or at the far end (cable).
                received: u64,
                /// Sent and not received (includes frames still in flight while running).
                lost: u64,
                /// Received after a later frame of their flow.
                reordered: u64,
                /// Received more than once.
                duplicated: u64,
                /// Mean latency, µs.
                latency_avg_us: f64,
                /// 99th percentile latency, µs.
                latency_p99_us: f64,
                /// Largest latency, µs (a frame held across a sender pause carries it).
                latency_max_us: f64,
                /// The longest sender pause, µs: the longest time the generator held
                /// frames the link would not take, including one still going on.
                pause_max_us: f64,
                /// All sender pauses together, µs.
                paused_us: f64,
            }

            /// Traffic counters of a link (`show-link -s`, `show-phys -s`).
            StatsRow => LinkStats [Default, Eq] {
                /// Link name.
                link: String,
                /// Frames received.
                ipackets: u64,
                /// Bytes received.
                rbytes: u64,
                /// Frames sent.
                opackets: u64,
                /// Bytes sent.
                obytes: u64,
                /// Frames dropped on receive (no buffer, ring stopped).
                idrops: u64,
                /// Frames the wire lost on send (no carrier, far end full).
                odrops: u64,
            }

            /// A flow (`show-flow`): its link and what it matches, each
            /// attribute empty where not given.
            FlowRow => FlowInfo [Eq] {
                /// Flow name.
                flow: String,
                /// The link it is on.
                link: String,
                /// `tcp`, `udp`, `sctp`, `icmp` or `icmpv6`.
                transport: String,
                /// The link's own address or prefix.
                local_ip: String,
                /// The far end's address or prefix.
                remote_ip: String,
                /// The link's own port.
                local_port: String,
                /// The far end's port.
                remote_port: String,
                /// The DS field, `0xVALUE[:0xMASK]`.
                dsfield: String,
            }

            /// One property of a flow (`show-flowprop`).
            FlowPropRow => FlowPropInfo [Eq] {
                /// Flow name.
                flow: String,
                /// Property name: `maxbw` or `priority`.
                property: String,
                /// Current value (`--` when none).
                value: String,
                /// Default value (`--` when none).
                default: String,
                /// Possible values.
                possible: String,
            }

            /// What a flow carried (`flowstat`), in its link's sense: `ipackets`
            /// what the link received of it.
            FlowStatsRow => FlowStats [Eq] {
                /// Flow name.
                flow: String,
                /// The link it is on.
                link: String,
                /// Frames received.
                ipackets: u64,
                /// Bytes received.
                rbytes: u64,
                /// Frames its maxbw dropped on arrival (not in `ipackets`).
                idrops: u64,
                /// Frames sent.
                opackets: u64,
                /// Bytes sent.
                obytes: u64,
                /// Frames its limits dropped on send: over its maxbw, or over
                /// its priority's share of a saturated port.
                odrops: u64,
            }

            /// What link protection dropped on a VNIC, by reason, and what it let
            /// through (`show-link -s`): a row for every VNIC that has protection
            /// or had it since netadmd started.
            ProtectRow => ProtectStats [Eq] {
                /// The VNIC.
                link: String,
                /// Its protections now, comma-separated (empty: none any more).
                protection: String,
                /// Where they are enforced: `datapath` (an emulated VNIC) or
                /// `kernel` (rules netadm owns in the kernel).
                enforced: String,
                /// Frames dropped by mac-nospoof.
                mac_nospoof: u64,
                /// Frames dropped by ip-nospoof.
                ip_nospoof: u64,
                /// Frames dropped by dhcp-nospoof.
                dhcp_nospoof: u64,
                /// Frames dropped by restricted.
                restricted: u64,
                /// Frames the protection let through.
                opackets: u64,
                /// Their bytes.
                obytes: u64,
            }
        }
    };
    (@each $make:ident $(
        $(#[$doc:meta])*
        $core:ident => $bus:ident [$($derive:ident),*] {
            $( $(#[$fdoc:meta])* $field:ident : $ty:ty ),* $(,)?
        }
    )*) => {
        $( $make! { [$(#[$doc])*] $core => $bus [$($derive),*] [$([$(#[$fdoc])*] $field: $ty,)*] } )*
    };
}
