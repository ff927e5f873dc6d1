//! What every `AF_PACKET` socket of netadm's is bound with: the emulated
//! afpacket wire's and the kernel wing's packet sockets alike.

use std::os::fd::RawFd;

/// Binds packet socket `fd` to interface `index` for `protocol`, an
/// ethertype in network order (`ethertype.to_be()`; `ETH_P_ALL` for every
/// frame).
pub fn bind(fd: RawFd, index: u32, protocol: u16) -> std::io::Result<()> {
    // SAFETY: a zeroed sockaddr_ll filled in; valid for its size.
    let rc = unsafe {
        let mut sa: libc::sockaddr_ll = std::mem::zeroed();
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = protocol;
        sa.sll_ifindex = index as i32;
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
