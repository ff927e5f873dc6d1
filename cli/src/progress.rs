//! A progress bar on stderr for mutating calls that take a while.
//!
//! On the bus the daemon emits `Progress(caller, op, phase, done, total)`
//! to everyone, and we keep the signals whose caller is our own
//! connection; on its private socket it emits them to us alone. The bar appears
//! only once the call has run longer than [`DELAY`], so quick operations
//! print nothing extra, and is cleared before the result is printed.

use std::future::Future;
use std::pin::{Pin, pin};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use indicatif::{ProgressBar, ProgressStyle};
use netadm_dbus::{INTERFACE, NetadmProxy, OpResult, Progress, ROOT_PATH};
use zbus::Connection;
use zbus::message::Message;

/// How long a call runs before the bar appears.
pub const DELAY: Duration = Duration::from_millis(300);

/// The latest progress report of our call.
#[derive(Debug, Clone, Default)]
struct Report {
    op: String,
    phase: String,
    done: u32,
    total: u32,
}

fn draw(bar: &ProgressBar, r: &Report) {
    bar.set_message(format!("{} {}", r.op, r.phase).trim().to_owned());
    if r.total > 0 {
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} ports {elapsed}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_length(r.total.into());
        bar.set_position(r.done.into());
    }
}

/// Runs the call `start` makes, showing its progress when it is slow. The
/// subscription is made before `start` is called, so no signal of the call
/// is missed. A failure to subscribe only loses the bar.
pub async fn run<F, Fut>(
    conn: &Connection,
    proxy: &NetadmProxy<'_>,
    op: &str,
    start: F,
) -> zbus::Result<OpResult>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = zbus::Result<OpResult>>,
{
    let Ok(mut signals) = subscribe(conn, proxy).await else {
        return start().await;
    };
    let me = conn.unique_name().map(|n| n.to_string()).unwrap_or_default();
    let mut call = pin!(start());
    // The call's own completion, with a deadline: a quick call returns
    // here and never shows a bar. Signals sent meanwhile wait in the stream.
    if let Ok(res) = tokio::time::timeout(DELAY, &mut call).await {
        return res;
    }
    let bar = ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(100));
    let mut last = Report { op: op.to_owned(), ..Report::default() };
    draw(&bar, &last);
    loop {
        tokio::select! {
            res = &mut call => {
                bar.finish_and_clear();
                return res;
            }
            Some(sig) = signals.next() => {
                let Some(sig) = Progress::from_message(sig) else { continue };
                let Ok(a) = sig.args() else { continue };
                if *a.caller() != me {
                    continue;
                }
                last = Report {
                    op: a.op().to_string(),
                    phase: a.phase().to_string(),
                    done: *a.done(),
                    total: *a.total(),
                };
                draw(&bar, &last);
            }
        }
    }
}

/// The progress signals: on the bus, the proxy's (from netadmd's name's
/// owner); peer to peer, where no message has a sender and nobody owns a
/// name, every `Progress` that comes.
async fn subscribe(
    conn: &Connection,
    proxy: &NetadmProxy<'_>,
) -> zbus::Result<Pin<Box<dyn Stream<Item = Message> + Send>>> {
    if conn.is_bus() {
        let signals = proxy.receive_progress().await?;
        return Ok(Box::pin(signals.map(|s| s.message().clone())));
    }
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .path(ROOT_PATH)?
        .interface(INTERFACE)?
        .member("Progress")?
        .build();
    Ok(Box::pin(
        zbus::MessageStream::for_match_rule(rule, conn, None)
            .await?
            .filter_map(|m| async { m.ok() }),
    ))
}
