//! A client of the private socket as zbus sees it: tokio's stream, whose
//! peer's credentials are read from the socket alone when the peer is
//! root.
//!
//! zbus asks for the peer's credentials during every server handshake,
//! and its own answer looks the peer's groups up in the user database
//! (`getpwuid_r`, `getgrouplist`: /etc/passwd and /etc/group, or LDAP and
//! SSSD where NSS says so), on a blocking thread, before it reads the
//! client's first line. Root, whom the authorizer admits without groups,
//! needs none of it, and a root command should not wait on a directory
//! that does not answer; any other peer's credentials are zbus's, groups
//! and all. (With /etc files behind NSS the lookup is cheap: no command
//! measured faster without it.)

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use zbus::connection::socket::{ReadHalf, Socket, Split, WriteHalf};
use zbus::fdo::ConnectionCredentials;

/// The private socket's stream; `root` holds the peer's pid when the
/// kernel says its uid is 0.
#[derive(Debug)]
pub struct PeerStream {
    stream: tokio::net::UnixStream,
    uid: Option<u32>,
    root: Option<u32>,
}

impl PeerStream {
    /// `stream`, whose peer the kernel reports (`SO_PEERCRED`, read once).
    pub fn new(stream: tokio::net::UnixStream) -> Self {
        let cred = stream.peer_cred().ok();
        let root = cred
            .filter(|c| c.uid() == 0)
            .map(|c| c.pid().and_then(|p| u32::try_from(p).ok()).unwrap_or(0));
        Self { stream, uid: cred.map(|c| c.uid()), root }
    }

    /// The peer's uid, as the kernel reported it.
    pub fn uid(&self) -> Option<u32> {
        self.uid
    }
}

/// Root's credentials as the socket gave them (no groups: the D-Bus
/// specification allows them absent); another peer's, `theirs` (zbus's).
async fn credentials(
    root: Option<u32>,
    theirs: impl Future<Output = io::Result<ConnectionCredentials>>,
) -> io::Result<ConnectionCredentials> {
    match root {
        Some(pid) => {
            let c = ConnectionCredentials::default().set_unix_user_id(0);
            Ok(if pid > 0 { c.set_process_id(pid) } else { c })
        }
        None => theirs.await,
    }
}

impl Socket for PeerStream {
    type ReadHalf = PeerRead;
    type WriteHalf = PeerWrite;

    fn split(self) -> Split<PeerRead, PeerWrite> {
        let (read, write) = self.stream.into_split();
        Split::new(
            PeerRead { inner: read, root: self.root },
            PeerWrite { inner: write, root: self.root },
        )
    }
}

/// The read half: tokio's, but for root's credentials.
#[derive(Debug)]
pub struct PeerRead {
    inner: tokio::net::unix::OwnedReadHalf,
    root: Option<u32>,
}

/// The write half: tokio's, but for root's credentials.
#[derive(Debug)]
pub struct PeerWrite {
    inner: tokio::net::unix::OwnedWriteHalf,
    root: Option<u32>,
}

#[async_trait::async_trait]
impl ReadHalf for PeerRead {
    async fn recvmsg(&mut self, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
        self.inner.recvmsg(buf).await
    }

    fn can_pass_unix_fd(&self) -> bool {
        ReadHalf::can_pass_unix_fd(&self.inner)
    }

    async fn peer_credentials(&mut self) -> io::Result<ConnectionCredentials> {
        credentials(self.root, ReadHalf::peer_credentials(&mut self.inner)).await
    }
}

#[async_trait::async_trait]
impl WriteHalf for PeerWrite {
    async fn sendmsg(&mut self, buffer: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
        self.inner.sendmsg(buffer, fds).await
    }

    async fn close(&mut self) -> io::Result<()> {
        self.inner.close().await
    }

    fn can_pass_unix_fd(&self) -> bool {
        WriteHalf::can_pass_unix_fd(&self.inner)
    }

    async fn peer_credentials(&mut self) -> io::Result<ConnectionCredentials> {
        credentials(self.root, WriteHalf::peer_credentials(&mut self.inner)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn roots_credentials_are_the_sockets_and_anyone_elses_zbuss() {
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let me = a.peer_cred().unwrap();
        let s = PeerStream::new(a);
        let (mut r, mut w) = s.split().take();
        let got = ReadHalf::peer_credentials(&mut r).await.unwrap();
        let also = WriteHalf::peer_credentials(&mut w).await.unwrap();
        assert_eq!(got.unix_user_id(), Some(me.uid()));
        assert_eq!(also.unix_user_id(), Some(me.uid()));
        assert_eq!(got.process_id(), me.pid().map(|p| p as u32));
        assert_eq!(
            PeerStream::new(tokio::net::UnixStream::pair().unwrap().0).uid(),
            Some(me.uid())
        );
        if me.uid() == 0 {
            // Read from the socket alone: no user database, so no groups.
            assert_eq!(got.unix_group_ids(), None);
        } else {
            // zbus's own answer, with the groups.
            assert!(got.unix_group_ids().is_some_and(|g| !g.is_empty()));
        }
    }

    #[tokio::test]
    async fn anyone_but_root_gets_the_answer_zbus_gives() {
        let theirs =
            || ConnectionCredentials::default().set_unix_user_id(1000).add_unix_group_id(100);
        let got = credentials(None, std::future::ready(Ok(theirs()))).await.unwrap();
        assert_eq!((got.unix_user_id(), got.unix_group_ids()), (Some(1000), Some(&vec![100])));
        let root = credentials(Some(7), std::future::ready(Ok(theirs()))).await.unwrap();
        assert_eq!((root.unix_user_id(), root.process_id()), (Some(0), Some(7)));
        assert_eq!(root.unix_group_ids(), None);
    }
}
