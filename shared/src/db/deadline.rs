//! The client-side deadline on database work (`HOOKLEDGER_DB_CLIENT_DEADLINE_MS`,
//! [`crate::config::DatabaseSettings::client_deadline`]): the one place the receiver and the
//! worker bound what they wait for from PostgreSQL.
//!
//! The server's limits (`statement_timeout`, `lock_timeout`,
//! `idle_in_transaction_session_timeout`) end what the server is doing; they cannot end a wait
//! on a network path that stopped answering without closing (a failover, a dead NAT entry),
//! and neither can TCP keepalives (the peer's kernel still acknowledges). This does: the
//! connection is taken from the pool and the work runs under one `tokio::time::timeout`; past
//! it the work is dropped and its connection closed ([`Connection::discard`]), never returned
//! to the pool, so the next step gets a fresh one. Whatever the abandoned work sent may or may
//! not have committed: callers treat the outcome as unknown (the receiver answers 503 with
//! `Retry-After`; the worker leaves the row to its lease's expiry).

use std::future::Future;
use std::time::Duration;

use super::Connection;

/// The work outlived the client deadline; its connection was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the database did not answer within the client deadline of {} ms", .deadline.as_millis())]
pub struct DeadlineExceeded {
    /// The deadline that passed.
    pub deadline: Duration,
}

/// Runs `future` within `deadline`: the primitive under the others, for database work that
/// holds no pooled connection (opening one, a cancel request).
///
/// # Errors
/// [`DeadlineExceeded`] when the deadline passed first (`future` is dropped).
pub async fn bound<F: Future>(
    deadline: Duration,
    future: F,
) -> Result<F::Output, DeadlineExceeded> {
    tokio::time::timeout(deadline, future)
        .await
        .map_err(|_elapsed| DeadlineExceeded { deadline })
}

/// Runs `work` on `conn` within `deadline`, handing the connection back with the result so
/// later work can use it; past the deadline the connection is closed instead.
///
/// # Errors
/// [`DeadlineExceeded`] when the deadline passed first (the outcome of what `work` sent is
/// unknown).
pub async fn on<T>(
    deadline: Duration,
    conn: Connection,
    work: impl AsyncFnOnce(&Connection) -> T,
) -> Result<(T, Connection), DeadlineExceeded> {
    on_within(deadline, deadline, conn, work).await
}

/// [`on`] with `left` of the `deadline` still to go.
async fn on_within<T>(
    deadline: Duration,
    left: Duration,
    conn: Connection,
    work: impl AsyncFnOnce(&Connection) -> T,
) -> Result<(T, Connection), DeadlineExceeded> {
    // The work borrows the connection and is dropped when the timeout returns, so one
    // abandoned mid-statement is closed here rather than returned to the pool.
    let outcome = tokio::time::timeout(left, work(&conn)).await;
    match outcome {
        Ok(done) => Ok((done, conn)),
        Err(_elapsed) => {
            conn.discard();
            Err(DeadlineExceeded { deadline })
        }
    }
}

/// Takes a connection with `connect` and runs `work` on it, both within `deadline` (one bound
/// for the two). The connection goes back to the pool when `work` ends in time, whatever its
/// result; past the deadline it is closed instead and [`DeadlineExceeded`] is returned.
///
/// # Errors
/// The outer [`DeadlineExceeded`] when the deadline passed first (the outcome of what `work`
/// sent is unknown); the inner `E` is `connect`'s or `work`'s own error, unchanged.
pub async fn within<T, E>(
    deadline: Duration,
    connect: impl Future<Output = Result<Connection, E>>,
    work: impl AsyncFnOnce(&Connection) -> Result<T, E>,
) -> Result<Result<T, E>, DeadlineExceeded> {
    let started = tokio::time::Instant::now();
    let conn = match bound(deadline, connect).await? {
        Ok(conn) => conn,
        Err(error) => return Ok(Err(error)),
    };
    let left = deadline.saturating_sub(started.elapsed());
    let (done, conn) = on_within(deadline, left, conn, work).await?;
    drop(conn);
    Ok(done)
}
