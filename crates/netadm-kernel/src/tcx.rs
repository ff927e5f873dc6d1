//! netadm's BPF programs, on a device's tcx ingress (the kernel's BPF
//! hook on receive, ahead of tc's classifiers and of nftables' netdev
//! ingress, which a frame they redirect never meets):
//!
//! - **peer** (`na_peer` and the index it sends to, in hex): hands
//!   every frame the device receives to the peer of a veth end in another
//!   network namespace (`bpf_redirect_peer`): the frame enters the peer's
//!   receive path there and then, without going out of the veth end and
//!   through a second receive queue. Four instructions.
//! - **pass** (`na_pass` and the index it sends to): sends on to a device
//!   (`bpf_redirect`, out of it) what a [`Pass`] describes — untagged
//!   IPv4 that is not UDP, from one MAC and an allowed source — counting
//!   it, frames and bytes, in a map of its own (one slot per CPU) that
//!   outlives the programs that use it ([`PassCounts`]); everything else
//!   goes on (to nftables). 42 instructions and 3 per allowed prefix.
//!
//! Written out here as instructions, and loaded, attached, listed,
//! identified and detached with the bpf(2) system call. Attached with
//! `BPF_PROG_ATTACH`, not a link, so that a program stays when netadmd
//! goes, as its other kernel state does, and goes with the device. Its
//! name is how netadm knows its own and where it sends frames.
//!
//! Every function acts in the calling thread's network namespace (an
//! index names a device there), and needs a kernel with tcx (6.6):
//! without it, attaching fails with EINVAL.

use std::ffi::CStr;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::KernelError;

const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_PROG_LOAD: i32 = 5;
const BPF_PROG_ATTACH: i32 = 8;
const BPF_PROG_DETACH: i32 = 9;
const BPF_PROG_GET_FD_BY_ID: i32 = 13;
const BPF_MAP_GET_FD_BY_ID: i32 = 14;
const BPF_OBJ_GET_INFO_BY_FD: i32 = 15;
const BPF_PROG_QUERY: i32 = 16;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
const BPF_TCX_INGRESS: u32 = 46;
/// Helpers, by number: `bpf_map_lookup_elem`, `bpf_redirect`,
/// `bpf_redirect_peer`.
const MAP_LOOKUP: i32 = 1;
const REDIRECT: i32 = 23;
const REDIRECT_PEER: i32 = 155;
/// `struct __sk_buff`'s fields, by offset.
const SKB_LEN: i16 = 0;
const SKB_VLAN_PRESENT: i16 = 20;
const SKB_DATA: i16 = 76;
const SKB_DATA_END: i16 = 80;
/// What a program returns for a frame that goes on (`TCX_NEXT`).
const NEXT: i32 = -1;
/// The most allowed prefixes a pass program compares (3 instructions
/// each); with more, the frames take nftables' rules.
pub const MAX_PREFIXES: usize = 64;

/// netadm's programs, each named by its kind and its target's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Peer,
    Pass,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Peer => "na_peer",
            Kind::Pass => "na_pass",
        }
    }
}

/// The name of `kind`'s program sending to device `target`.
fn name(kind: Kind, target: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    let text = format!("{}{target:08x}", kind.prefix());
    b[..text.len()].copy_from_slice(text.as_bytes());
    b
}

/// The kind and target of a program named `name`, if it is netadm's.
fn parse(name: &str) -> Option<(Kind, u32)> {
    [Kind::Peer, Kind::Pass].into_iter().find_map(|k| {
        let hex = name.strip_prefix(k.prefix())?;
        (hex.len() == 8).then(|| u32::from_str_radix(hex, 16).ok().map(|t| (k, t)))?
    })
}

/// `union bpf_attr`, as many bytes as any command here uses, zeroed
/// (the kernel requires the bytes it does not know to be zero).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Self {
        Attr([0; 128])
    }
    fn u32(mut self, off: usize, v: u32) -> Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(mut self, off: usize, v: u64) -> Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn bytes(mut self, off: usize, b: &[u8]) -> Self {
        self.0[off..off + b.len()].copy_from_slice(b);
        self
    }
    fn get_u32(&self, off: usize) -> u32 {
        u32::from_ne_bytes(self.0[off..off + 4].try_into().expect("4 bytes"))
    }
}

/// bpf(2): its result, or the OS error.
fn bpf(cmd: i32, attr: &mut Attr) -> io::Result<i32> {
    // SAFETY: `attr` is a valid, writable `union bpf_attr` of the size
    // given; every pointer in it points into memory that outlives the
    // call.
    let rc = unsafe {
        libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len() as libc::c_uint)
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc as i32) }
}

/// bpf(2) for a command that returns a new descriptor.
fn bpf_fd(cmd: i32, attr: &mut Attr) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)?;
    // SAFETY: the kernel just returned this descriptor, owned by no one.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn io_err(op: String) -> impl FnOnce(io::Error) -> KernelError {
    move |source| KernelError::Io { op, source }
}

/// Where a jump goes, resolved when the program is whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    /// Count the frame, then send it.
    Count,
    /// Send the frame.
    Send,
    /// The frame goes on.
    Next,
}

/// A program being written: `struct bpf_insn`s, and the jumps to
/// resolve.
#[derive(Default)]
struct Asm {
    code: Vec<[u8; 8]>,
    jumps: Vec<(usize, Label)>,
    labels: Vec<(Label, usize)>,
}

impl Asm {
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) -> &mut Self {
        let mut b = [0; 8];
        b[0] = code;
        b[1] = dst | (src << 4);
        b[2..4].copy_from_slice(&off.to_ne_bytes());
        b[4..].copy_from_slice(&imm.to_ne_bytes());
        self.code.push(b);
        self
    }
    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) -> &mut Self {
        self.jumps.push((self.code.len(), to));
        self.op(code, dst, src, 0, imm)
    }
    fn label(&mut self, l: Label) -> &mut Self {
        self.labels.push((l, self.code.len()));
        self
    }
    /// The program's bytes, every jump resolved.
    fn finish(mut self) -> Vec<u8> {
        for (at, to) in &self.jumps {
            let (_, target) = self.labels.iter().find(|(l, _)| l == to).expect("a label");
            let off = i16::try_from(*target as isize - *at as isize - 1).expect("a short program");
            self.code[*at][2..4].copy_from_slice(&off.to_ne_bytes());
        }
        self.code.concat()
    }
}

// Opcodes (`BPF_CLASS | BPF_OP | BPF_SRC`, or `| BPF_SIZE | BPF_MODE`).
const MOV64_K: u8 = 0xb7;
const MOV64_X: u8 = 0xbf;
const ADD64_K: u8 = 0x07;
const ADD64_X: u8 = 0x0f;
const MOV32_X: u8 = 0xbc;
const AND32_K: u8 = 0x54;
const LDX_W: u8 = 0x61;
const LDX_H: u8 = 0x69;
const LDX_B: u8 = 0x71;
const LDX_DW: u8 = 0x79;
const STX_DW: u8 = 0x7b;
const ST_W: u8 = 0x62;
const LD_IMM64: u8 = 0x18;
const JA: u8 = 0x05;
const JEQ64_K: u8 = 0x15;
const JGT64_X: u8 = 0x2d;
const JEQ32_K: u8 = 0x16;
const JNE32_K: u8 = 0x56;
const JLT32_K: u8 = 0xa6;
const JGT32_K: u8 = 0x26;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
/// `src_reg` of a `LD_IMM64` whose immediate is a map's descriptor.
const PSEUDO_MAP_FD: u8 = 1;

/// The peer program: everything to the peer of veth end `end`.
fn peer_code(end: i32) -> Vec<u8> {
    let mut a = Asm::default();
    a.op(MOV64_K, 1, 0, 0, end)
        .op(MOV64_K, 2, 0, 0, 0)
        .op(CALL, 0, 0, 0, REDIRECT_PEER)
        // r0: TC_ACT_REDIRECT.
        .op(EXIT, 0, 0, 0, 0);
    a.finish()
}

/// What a pass program sends on: untagged IPv4 that is not UDP, from
/// `mac` and a source in one of the prefixes `v4`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    /// The source MAC.
    pub mac: [u8; 6],
    /// The allowed sources, as prefixes (at most [`MAX_PREFIXES`]).
    pub v4: Vec<(Ipv4Addr, u8)>,
}

/// The pass program: what `p` describes to device `to`, counted in map
/// `map`; the rest goes on. Loads read the frame as the host orders
/// bytes, and each constant compared is made from the frame's bytes the
/// same way.
fn pass_code(to: i32, map: i32, p: &Pass) -> Vec<u8> {
    let ne32 = |b: [u8; 4]| i32::from_ne_bytes(b);
    let ne16 = |b: [u8; 2]| i32::from(u16::from_ne_bytes(b));
    let m = p.mac;
    let mut a = Asm::default();
    a.op(MOV64_X, 6, 1, 0, 0) // r6 = the skb
        .op(LDX_W, 4, 6, SKB_VLAN_PRESENT, 0)
        .jump(JNE32_K, 4, 0, 0, Label::Next) // a tag (offloaded): nftables'
        .op(LDX_W, 2, 6, SKB_DATA, 0)
        .op(LDX_W, 3, 6, SKB_DATA_END, 0)
        .op(MOV64_X, 4, 2, 0, 0)
        .op(ADD64_K, 4, 0, 0, 34)
        .jump(JGT64_X, 4, 3, 0, Label::Next) // under 34 bytes: Ethernet and IPv4 headers
        .op(LDX_W, 4, 2, 6, 0)
        .jump(JNE32_K, 4, 0, ne32([m[0], m[1], m[2], m[3]]), Label::Next)
        .op(LDX_H, 4, 2, 10, 0)
        .jump(JNE32_K, 4, 0, ne16([m[4], m[5]]), Label::Next)
        .op(LDX_H, 4, 2, 12, 0)
        .jump(JNE32_K, 4, 0, ne16([0x08, 0x00]), Label::Next) // IPv4, in the frame: untagged
        .op(LDX_B, 4, 2, 14, 0)
        .jump(JLT32_K, 4, 0, 0x45, Label::Next) // version 4, a header of 5 words or more
        .jump(JGT32_K, 4, 0, 0x4f, Label::Next)
        .op(LDX_B, 4, 2, 23, 0)
        .jump(JEQ32_K, 4, 0, i32::from(libc::IPPROTO_UDP as u8), Label::Next)
        .op(LDX_W, 4, 2, 26, 0); // the source address
    for (addr, len) in &p.v4 {
        let mask = u32::MAX.checked_shl(32 - u32::from(*len)).unwrap_or(0).to_be_bytes();
        let net = (u32::from(*addr) & u32::from_be_bytes(mask)).to_be_bytes();
        a.op(MOV32_X, 5, 4, 0, 0).op(AND32_K, 5, 0, 0, ne32(mask)).jump(
            JEQ32_K,
            5,
            0,
            ne32(net),
            Label::Count,
        );
    }
    a.jump(JA, 0, 0, 0, Label::Next)
        .label(Label::Count)
        .op(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map)
        .op(0, 0, 0, 0, 0)
        .op(MOV64_X, 2, 10, 0, 0)
        .op(ADD64_K, 2, 0, 0, -8)
        .op(ST_W, 10, 0, -8, 0) // key 0
        .op(CALL, 0, 0, 0, MAP_LOOKUP)
        .jump(JEQ64_K, 0, 0, 0, Label::Send)
        .op(LDX_DW, 1, 0, 0, 0)
        .op(ADD64_K, 1, 0, 0, 1)
        .op(STX_DW, 0, 1, 0, 0) // frames += 1
        // Bytes as nftables counts them on ingress: from the network
        // header (tcx sees the frame from its Ethernet header).
        .op(LDX_W, 1, 6, SKB_LEN, 0)
        .op(ADD64_K, 1, 0, 0, -14)
        .op(LDX_DW, 2, 0, 8, 0)
        .op(ADD64_X, 2, 1, 0, 0)
        .op(STX_DW, 0, 2, 8, 0) // bytes += len
        .label(Label::Send)
        .op(MOV64_K, 1, 0, 0, to)
        .op(MOV64_K, 2, 0, 0, 0)
        .op(CALL, 0, 0, 0, REDIRECT)
        .op(EXIT, 0, 0, 0, 0)
        .label(Label::Next)
        .op(MOV64_K, 0, 0, 0, NEXT)
        .op(EXIT, 0, 0, 0, 0);
    a.finish()
}

/// Loads `code` as `kind`'s program sending to `target`.
fn load(kind: Kind, target: u32, code: &[u8]) -> Result<OwnedFd, KernelError> {
    let license = c"GPL";
    let mut attr = Attr::new()
        .u32(0, BPF_PROG_TYPE_SCHED_CLS)
        .u32(4, (code.len() / 8) as u32)
        .u64(8, code.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .bytes(48, &name(kind, target));
    bpf_fd(BPF_PROG_LOAD, &mut attr).map_err(io_err(format!(
        "load netadm's BPF program {}",
        String::from_utf8_lossy(&name(kind, target)).trim_end_matches('\0')
    )))
}

/// A program on a device's tcx ingress.
struct Prog {
    fd: OwnedFd,
    name: String,
    /// The ids of the maps it uses.
    maps: Vec<u32>,
}

/// The programs on device `on`'s tcx ingress, first to last.
fn attached(on: u32) -> Result<Vec<Prog>, KernelError> {
    let op = || format!("list the BPF programs on device {on}'s tcx ingress");
    let mut ids = [0u32; 64];
    let mut attr = Attr::new()
        .u32(0, on)
        .u32(4, BPF_TCX_INGRESS)
        .u64(16, ids.as_mut_ptr() as u64)
        .u32(24, ids.len() as u32);
    bpf(BPF_PROG_QUERY, &mut attr).map_err(io_err(op()))?;
    let n = (attr.get_u32(24) as usize).min(ids.len());
    let mut out = vec![];
    for id in &ids[..n] {
        let fd = match bpf_fd(BPF_PROG_GET_FD_BY_ID, &mut Attr::new().u32(0, *id)) {
            Ok(fd) => fd,
            // Detached and freed since the list was made.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e) => return Err(io_err(op())(e)),
        };
        // `struct bpf_prog_info` up to its name (bytes 64..80), asking
        // for the ids of up to 4 maps.
        let mut maps = [0u32; 4];
        let mut info = [0u8; 80];
        info[52..56].copy_from_slice(&(maps.len() as u32).to_ne_bytes());
        info[56..64].copy_from_slice(&(maps.as_mut_ptr() as u64).to_ne_bytes());
        let mut a = Attr::new()
            .u32(0, fd.as_raw_fd() as u32)
            .u32(4, info.len() as u32)
            .u64(8, info.as_mut_ptr() as u64);
        bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a).map_err(io_err(op()))?;
        let name = CStr::from_bytes_until_nul(&info[64..80])
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        let nmaps = (u32::from_ne_bytes(info[52..56].try_into().expect("4")) as usize).min(4);
        out.push(Prog { fd, name, maps: maps[..nmaps].to_vec() });
    }
    Ok(out)
}

/// netadm's programs of `kind` on device `on`'s tcx ingress, each with
/// its target.
fn ours(on: u32, kind: Kind) -> Result<Vec<(Prog, u32)>, KernelError> {
    Ok(attached(on)?
        .into_iter()
        .filter_map(|p| match parse(&p.name) {
            Some((k, t)) if k == kind => Some((p, t)),
            _ => None,
        })
        .collect())
}

/// Detaches program `fd` from device `on`'s tcx ingress.
fn detach(on: u32, fd: &OwnedFd) -> Result<(), KernelError> {
    let mut attr = Attr::new().u32(0, on).u32(4, fd.as_raw_fd() as u32).u32(8, BPF_TCX_INGRESS);
    match bpf(BPF_PROG_DETACH, &mut attr) {
        // Gone already (the device went with it).
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        r => r.map(drop).map_err(io_err(format!("detach a BPF program from device {on}"))),
    }
}

/// Puts `prog`, `kind`'s program sending to `target`, on device `on`'s
/// tcx ingress after any other's, taking off the ones of `kind` it
/// replaces (`old`): after it, or (`first`) before it, so that none of
/// them acts beside it for a moment; read back.
fn install(
    on: u32,
    kind: Kind,
    target: u32,
    prog: &OwnedFd,
    old: &[(Prog, u32)],
    first: bool,
) -> Result<(), KernelError> {
    let drop_old = || old.iter().try_for_each(|(p, _)| detach(on, &p.fd));
    if first {
        drop_old()?;
    }
    let mut attr = Attr::new().u32(0, on).u32(4, prog.as_raw_fd() as u32).u32(8, BPF_TCX_INGRESS);
    bpf(BPF_PROG_ATTACH, &mut attr).map_err(io_err(format!(
        "attach a BPF program to device {on}'s tcx ingress (tcx is in Linux 6.6 and later)"
    )))?;
    if !first {
        drop_old()?;
    }
    let now = targets(on, kind)?;
    if now != [target] {
        return Err(KernelError::NotApplied {
            what: format!("netadm's {} program on device {on}, to device {target}", kind.prefix()),
            kept: format!("netadm's programs of that kind there sending to devices {now:?}"),
        });
    }
    Ok(())
}

/// Takes netadm's programs of `kind` off device `on`'s tcx ingress (none
/// there, or no such device: nothing to do).
fn clear(on: u32, kind: Kind) -> Result<(), KernelError> {
    let progs = match ours(on, kind) {
        Ok(p) => p,
        Err(KernelError::Io { source, .. }) if source.raw_os_error() == Some(libc::ENODEV) => {
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    for (p, _) in &progs {
        detach(on, &p.fd)?;
    }
    Ok(())
}

/// An index as a program's immediate.
fn imm(index: u32) -> Result<i32, KernelError> {
    i32::try_from(index).map_err(|_| KernelError::Invalid {
        what: format!("device {index}"),
        reason: "an index a BPF program cannot hold".into(),
    })
}

/// Makes device `on` hand everything it receives to the peer of veth end
/// `end`: netadm's peer program on its tcx ingress, replacing one that
/// sends elsewhere; read back. Nothing changes when it is there already.
pub fn redirect_peer(on: u32, end: u32) -> Result<(), KernelError> {
    let old = ours(on, Kind::Peer)?;
    if old.len() == 1 && old[0].1 == end {
        return Ok(());
    }
    let prog = load(Kind::Peer, end, &peer_code(imm(end)?))?;
    install(on, Kind::Peer, end, &prog, &old, false)
}

/// Where netadm's programs of `kind` on device `on` send, first to last.
fn targets(on: u32, kind: Kind) -> Result<Vec<u32>, KernelError> {
    Ok(ours(on, kind)?.into_iter().map(|(_, t)| t).collect())
}

/// Where netadm's peer programs on device `on` send what it receives:
/// the index of each one's veth end, first to last (empty: none there).
pub fn redirect_peer_of(on: u32) -> Result<Vec<u32>, KernelError> {
    targets(on, Kind::Peer)
}

/// Takes netadm's peer programs off device `on`.
pub fn clear_redirect_peer(on: u32) -> Result<(), KernelError> {
    clear(on, Kind::Peer)
}

/// The counters of netadm's pass programs on one device: a map, frames
/// and bytes per CPU, that lives as long as a program or a holder of
/// this uses it. Held, it carries the counts over to a program that
/// replaces one, or comes after none was there for a while.
#[derive(Debug)]
pub struct PassCounts(OwnedFd);

impl PassCounts {
    /// New counters, at zero, for device `on`'s pass program.
    fn new(on: u32) -> Result<Self, KernelError> {
        let mut attr = Attr::new()
            .u32(0, BPF_MAP_TYPE_PERCPU_ARRAY)
            .u32(4, 4)
            .u32(8, 16)
            .u32(12, 1)
            .bytes(28, b"na_passed");
        let op = format!("make the counters of device {on}'s pass program");
        Ok(Self(bpf_fd(BPF_MAP_CREATE, &mut attr).map_err(io_err(op))?))
    }

    /// What the programs counted: frames and bytes (from the network
    /// header, as nftables counts them on ingress), summed over the CPUs.
    pub fn read(&self) -> Result<(u64, u64), KernelError> {
        let op = || "read the counters of a pass program".to_owned();
        let cpus = possible_cpus().map_err(io_err(op()))?;
        let mut values = vec![0u64; 2 * cpus];
        let key = 0u32;
        let mut attr = Attr::new()
            .u32(0, self.0.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, values.as_mut_ptr() as u64);
        bpf(BPF_MAP_LOOKUP_ELEM, &mut attr).map_err(io_err(op()))?;
        let sum = |i: usize| values.iter().skip(i).step_by(2).sum();
        Ok((sum(0), sum(1)))
    }

    /// Another holder of the same counters.
    pub fn share(&self) -> Result<Self, KernelError> {
        let fd = self.0.try_clone().map_err(io_err("hold a pass program's counters".into()))?;
        Ok(Self(fd))
    }
}

/// The counters the pass programs `progs` of device `on` count into, if
/// any is there.
fn counts_of(on: u32, progs: &[(Prog, u32)]) -> Result<Option<PassCounts>, KernelError> {
    let Some(id) = progs.iter().find_map(|(p, _)| p.maps.first().copied()) else {
        return Ok(None);
    };
    let op = format!("open the counters of device {on}'s pass program");
    Ok(Some(PassCounts(
        bpf_fd(BPF_MAP_GET_FD_BY_ID, &mut Attr::new().u32(0, id)).map_err(io_err(op))?,
    )))
}

/// The counters of netadm's pass program on device `on`, if one is there.
pub fn pass_counts(on: u32) -> Result<Option<PassCounts>, KernelError> {
    counts_of(on, &ours(on, Kind::Pass)?)
}

/// Makes device `on` send what `p` describes out of device `to`,
/// counted: netadm's pass program on its tcx ingress, replacing the one
/// there, which is taken off first (what comes meanwhile goes on, to
/// nftables), so that what it passed and `p` no longer allows is never
/// passed beside it; read back. It counts into `counts`, else into the
/// counters of the program it replaces, else into new ones: those it
/// counts into.
pub fn pass(
    on: u32,
    to: u32,
    p: &Pass,
    counts: Option<&PassCounts>,
) -> Result<PassCounts, KernelError> {
    if p.v4.is_empty() || p.v4.len() > MAX_PREFIXES || p.v4.iter().any(|(_, l)| *l > 32) {
        return Err(KernelError::Invalid {
            what: format!("netadm's pass program on device {on}"),
            reason: format!("1 to {MAX_PREFIXES} IPv4 prefixes of 0 to 32 bits"),
        });
    }
    let old = ours(on, Kind::Pass)?;
    let map = match counts {
        Some(c) => c.share()?,
        None => counts_of(on, &old)?.map_or_else(|| PassCounts::new(on), Ok)?,
    };
    let prog = load(Kind::Pass, to, &pass_code(imm(to)?, map.0.as_raw_fd(), p))?;
    install(on, Kind::Pass, to, &prog, &old, true)?;
    Ok(map)
}

/// Where netadm's pass programs on device `on` send what they pass,
/// first to last (empty: none there).
pub fn pass_of(on: u32) -> Result<Vec<u32>, KernelError> {
    targets(on, Kind::Pass)
}

/// What netadm's pass program on device `on` has passed (see
/// [`PassCounts::read`]); none when it is not there.
pub fn passed(on: u32) -> Result<Option<(u64, u64)>, KernelError> {
    pass_counts(on)?.map(|c| c.read()).transpose()
}

/// Takes netadm's pass programs off device `on` (their counts go with
/// the last holder of their [`PassCounts`]).
pub fn clear_pass(on: u32) -> Result<(), KernelError> {
    clear(on, Kind::Pass)
}

/// How many CPUs the kernel may ever have (a per-CPU map's value has a
/// slot for each): `/sys/devices/system/cpu/possible`, such as `0-3`.
fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    count_cpus(&text).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidData, format!("possible CPUs {text:?}"))
    })
}

/// The highest CPU in a list such as `0-3,8`, plus one.
fn count_cpus(list: &str) -> Option<usize> {
    let mut max = None;
    for part in list.trim().split(',') {
        let last = part.rsplit('-').next()?.trim().parse::<usize>().ok()?;
        max = max.max(Some(last));
    }
    max.map(|m| m + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_name_says_its_kind_and_target_and_only_netadms_do() {
        let text = |k, t| String::from_utf8(name(k, t).to_vec()).unwrap();
        assert_eq!(text(Kind::Peer, 42), "na_peer0000002a\0");
        assert_eq!(parse("na_peer0000002a"), Some((Kind::Peer, 42)));
        assert_eq!(parse("na_passffffffff"), Some((Kind::Pass, u32::MAX)));
        assert_eq!(parse("na_peer2a"), None);
        assert_eq!(parse("na_peer0000002g"), None);
        assert_eq!(parse("cil_from_netdev"), None);
    }

    #[test]
    fn the_possible_cpus_are_counted_from_the_kernels_list() {
        assert_eq!(count_cpus("0\n"), Some(1));
        assert_eq!(count_cpus("0-1\n"), Some(2));
        assert_eq!(count_cpus("0-3,8-11"), Some(12));
        assert_eq!(count_cpus(""), None);
    }

    #[test]
    fn a_pass_program_compares_three_instructions_per_prefix_and_every_jump_lands_inside() {
        let p = |n: usize| Pass {
            mac: [2, 0, 0, 0, 0, 1],
            v4: (0..n).map(|i| (Ipv4Addr::new(192, 0, 2, i as u8), 32)).collect(),
        };
        let (one, two) = (pass_code(7, 3, &p(1)).len() / 8, pass_code(7, 3, &p(2)).len() / 8);
        assert_eq!(two - one, 3);
        let code = pass_code(7, 3, &p(MAX_PREFIXES));
        let insns: Vec<&[u8]> = code.chunks(8).collect();
        for (i, b) in insns.iter().enumerate() {
            let is_jump = b[0] & 0x07 == 0x05 || b[0] & 0x07 == 0x06;
            if is_jump && b[0] != CALL && b[0] != EXIT {
                let off = i16::from_ne_bytes([b[2], b[3]]) as isize;
                let to = i as isize + 1 + off;
                assert!(to > i as isize && (to as usize) < insns.len(), "jump {i} to {to}");
            }
        }
        assert_eq!(insns.last().unwrap()[0], EXIT);
    }
}
