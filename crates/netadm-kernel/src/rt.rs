//! Where the rtnetlink connections run: the daemon's tokio runtime when
//! one is entered where a connection is opened (netadmd enters its own
//! before it starts the core), else one small runtime of this crate's,
//! made on first use (tests and tools that drive the core directly).
//!
//! Callers stay synchronous: the core changes the kernel under its
//! mutation lock on a blocking thread. A request is spawned on the
//! runtime and waited for on a channel with a deadline, so it never
//! blocks forever and never panics whatever thread asks (even a runtime
//! worker: it only waits, it does not nest a runtime).

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};

use crate::KernelError;

/// The runtime a new connection is spawned on.
pub(crate) fn handle() -> Result<Handle, KernelError> {
    if let Ok(h) = Handle::try_current() {
        return Ok(h);
    }
    static OWN: OnceLock<Result<Runtime, String>> = OnceLock::new();
    let rt = OWN.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("netadm-rtnetlink")
            .enable_io()
            .build()
            .map_err(|e| e.to_string())
    });
    match rt {
        Ok(rt) => Ok(rt.handle().clone()),
        Err(e) => Err(KernelError::Io {
            op: "start the rtnetlink runtime".into(),
            source: std::io::Error::other(e.clone()),
        }),
    }
}

/// Runs `fut` on `rt` and waits for it, at most `deadline`.
pub(crate) fn wait<T: Send + 'static>(
    rt: &Handle,
    op: &str,
    deadline: Duration,
    fut: impl Future<Output = T> + Send + 'static,
) -> Result<T, KernelError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let task = rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv_timeout(deadline).map_err(|e| {
        task.abort();
        let source = match e {
            std::sync::mpsc::RecvTimeoutError::Timeout => std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the kernel did not answer within {deadline:?}"),
            ),
            std::sync::mpsc::RecvTimeoutError::Disconnected => gone(),
        };
        KernelError::Io { op: op.into(), source }
    })
}

fn gone() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the rtnetlink runtime stopped")
}
