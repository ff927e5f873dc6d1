//! rtnetlink notifications: a connection subscribed to the link and
//! address multicast groups, so the daemon hears about changes someone
//! else makes to its devices (`ip link set ... mtu`, `ip addr del`,
//! `ip link del`) instead of polling for them.

use std::os::fd::{BorrowedFd, RawFd};
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};

use futures_util::future::{Either, select};
use futures_util::{FutureExt, Stream, StreamExt};
use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload};
use rtnetlink::packet_route::RouteNetlinkMessage;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::runtime::Handle;

use crate::{KernelError, rt};

/// What a batch of notifications touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// These interface indices (links or their addresses) changed.
    Indices(Vec<u32>),
    /// Notifications were lost (the socket overran): anything may have.
    All,
}

/// The notifications a connection hears.
pub(crate) type Rx = Pin<
    Box<
        dyn Stream<Item = (NetlinkMessage<RouteNetlinkMessage>, rtnetlink::sys::SocketAddr)> + Send,
    >,
>;

/// A subscription to link and address notifications.
pub struct Events {
    /// Taken by [`Events::wait`] while it waits.
    rx: Mutex<Option<Rx>>,
    rt: Handle,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Events")
    }
}

impl Events {
    /// Subscribes in this thread's network namespace, on a connection of
    /// its own (see [`crate::Netlink::open_with_events`] to share one).
    pub fn open() -> Result<Self, KernelError> {
        let (rx, rt) = crate::Netlink::subscribe()?;
        Ok(Self::from_receiver(rx, rt))
    }

    pub(crate) fn from_receiver(rx: Rx, rt: Handle) -> Self {
        Self { rx: Mutex::new(Some(rx)), rt }
    }

    /// Waits for notifications, or for `stop` to become readable (then
    /// `None`); returns what everything queued so far touched.
    pub fn wait(&self, stop: RawFd) -> Result<Option<Touched>, KernelError> {
        let op = "wait for notifications";
        let mut slot = self.rx.lock().unwrap_or_else(PoisonError::into_inner);
        let rx = slot.take().ok_or_else(|| KernelError::Io {
            op: op.into(),
            source: std::io::Error::other("the notifications ended"),
        })?;
        match rt::wait_or_stop(&self.rt, op, stop, batch(rx, stop))? {
            Some((rx, got)) => {
                *slot = rx;
                got.map_err(|source| KernelError::Io { op: op.into(), source })
            }
            // Stopped while the runtime was not running the wait.
            None => Ok(None),
        }
    }
}

/// The next batch: waits for one notification (or `stop`), then takes
/// every one already queued. Gives the stream back unless it ended.
async fn batch(mut rx: Rx, stop: RawFd) -> (Option<Rx>, std::io::Result<Option<Touched>>) {
    // SAFETY: the caller keeps `stop` open while it waits.
    let stop = match unsafe { BorrowedFd::borrow_raw(stop) }.try_clone_to_owned() {
        Ok(fd) => fd,
        Err(e) => return (Some(rx), Err(e)),
    };
    // SAFETY: the AsyncFd owns the descriptor it watches (a duplicate),
    // which stays open until the AsyncFd deregisters it.
    let stopped = match unsafe { AsyncFd::register_with_interest(stop, Interest::READABLE) } {
        Ok(fd) => fd,
        Err(e) => return (Some(rx), Err(e.into())),
    };
    let first = {
        let woken = std::pin::pin!(stopped.readable());
        match select(rx.next(), woken).await {
            Either::Left((m, _)) => m,
            Either::Right(_) => return (Some(rx), Ok(None)),
        }
    };
    let Some(first) = first else {
        return (None, Err(std::io::Error::other("the rtnetlink connection ended")));
    };
    let mut touched = Some(vec![]);
    let mut take = |m: NetlinkMessage<RouteNetlinkMessage>| match (index(&m), &mut touched) {
        (Some(Some(i)), Some(t)) => t.push(i),
        (None, _) => touched = None,
        _ => {}
    };
    take(first.0);
    while let Some(Some((m, _))) = rx.next().now_or_never() {
        take(m);
    }
    let touched = match touched {
        Some(mut t) => {
            t.sort_unstable();
            t.dedup();
            Touched::Indices(t)
        }
        None => Touched::All,
    };
    (Some(rx), Ok(Some(touched)))
}

/// The interface a notification is about: `Some(Some(i))` for a link or
/// address change, `Some(None)` for anything else, `None` when
/// notifications were lost (anything may have changed).
fn index(m: &NetlinkMessage<RouteNetlinkMessage>) -> Option<Option<u32>> {
    use RouteNetlinkMessage as R;
    match &m.payload {
        NetlinkPayload::Overrun(_) => None,
        NetlinkPayload::InnerMessage(R::NewLink(l) | R::DelLink(l)) => Some(Some(l.header.index)),
        NetlinkPayload::InnerMessage(R::NewAddress(a) | R::DelAddress(a)) => {
            Some(Some(a.header.index))
        }
        _ => Some(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::address::AddressMessage;
    use rtnetlink::packet_route::link::LinkMessage;

    #[test]
    fn link_and_address_messages_name_their_interface_and_overrun_names_all() {
        let mut l = LinkMessage::default();
        l.header.index = 7;
        let mut a = AddressMessage::default();
        a.header.index = 9;
        let inner = |m| NetlinkMessage::from(m);
        assert_eq!(index(&inner(RouteNetlinkMessage::DelLink(l))), Some(Some(7)));
        assert_eq!(index(&inner(RouteNetlinkMessage::NewAddress(a))), Some(Some(9)));
        assert_eq!(
            index(&NetlinkMessage::new(Default::default(), NetlinkPayload::Overrun(vec![]))),
            None
        );
    }
}
