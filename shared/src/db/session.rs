//! Pooled connections that stay poolable: per-transaction limits and optional named statements.
//!
//! Behind a transaction-mode pooler (pgbouncer, RDS Proxy) a client's consecutive transactions may
//! run on different server sessions, so nothing may rely on session state:
//!
//! - **Limits per transaction.** No start-up `options`, no session `SET`: every transaction starts
//!   with [`Connection::begin`], one simple-query message `BEGIN; SET LOCAL statement_timeout = ..;
//!   SET LOCAL lock_timeout = ..; SET LOCAL idle_in_transaction_session_timeout = ..`, pipelined
//!   with the transaction's first statement (no extra round trip). Statements outside an explicit
//!   transaction are wrapped the same way ([`Connection::autocommit`]).
//! - **Named statements optional.** With `statement_cache` on (a direct connection) each [`Sql`] is
//!   prepared once per connection and reused by name. Off, it is sent unnamed with its declared
//!   parameter types (Parse/Bind/Execute/Sync in one message: one round trip, nothing left behind
//!   on the server), which is what pgbouncer before 1.21 requires and what keeps RDS Proxy from
//!   pinning the session.

use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;

use futures_util::TryStreamExt;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Row, Statement};

use crate::config::DatabaseSettings;

/// One SQL statement of ours with its parameter types (`$1..$n`, in order), so it can be sent
/// unnamed without a prepare round trip.
#[derive(Debug)]
pub struct Sql {
    /// The statement text.
    pub text: &'static str,
    /// The PostgreSQL type of each parameter, `$1` first.
    pub types: &'static [Type],
}

/// Transaction settings of a pool: the `BEGIN` prefix with its `SET LOCAL`s, and whether
/// statements are cached by name.
#[derive(Debug, Clone)]
pub struct Session {
    begin: String,
    statement_cache: bool,
}

impl Session {
    /// The session for `settings`' limits (milliseconds) and statement cache flag.
    pub fn new(settings: &DatabaseSettings) -> Self {
        let session = Self::with_limits(
            settings.statement_timeout_ms,
            settings.lock_timeout_ms,
            settings.idle_in_transaction_timeout_ms,
            settings.statement_cache,
        );
        if settings.transaction_limits {
            session
        } else {
            session.without_limits()
        }
    }

    /// The same session sending a bare `BEGIN`: the limits come from the database role's
    /// settings (`ALTER ROLE .. SET`), for RDS Proxy, which pins a PostgreSQL session on `SET`.
    pub fn without_limits(mut self) -> Self {
        self.begin = "BEGIN".to_owned();
        self
    }

    /// A session with explicit limits, milliseconds each.
    pub fn with_limits(
        statement_timeout_ms: u64,
        lock_timeout_ms: u64,
        idle_in_transaction_timeout_ms: u64,
        statement_cache: bool,
    ) -> Self {
        Self {
            begin: format!(
                "BEGIN; SET LOCAL statement_timeout = {statement_timeout_ms}; \
                 SET LOCAL lock_timeout = {lock_timeout_ms}; \
                 SET LOCAL idle_in_transaction_session_timeout = {idle_in_transaction_timeout_ms}"
            ),
            statement_cache,
        }
    }

    /// The simple-query text that opens a transaction with this session's limits.
    pub fn begin_sql(&self) -> &str {
        &self.begin
    }

    /// Whether the limits are sent with every transaction (`SET LOCAL`), rather than carried
    /// by the database role.
    pub fn limits_per_transaction(&self) -> bool {
        self.begin != "BEGIN"
    }

    /// Whether statements are prepared once per connection and reused by name.
    pub fn statement_cache(&self) -> bool {
        self.statement_cache
    }
}

/// The connection pool: deadpool's, plus the [`Session`] every connection it hands out uses.
#[derive(Clone)]
pub struct Pool {
    inner: deadpool_postgres::Pool,
    session: Arc<Session>,
    /// The first connection, opened by [`Pool::warm`] while the function waits for its first
    /// event; [`Pool::get`] waits for it rather than opening a second one beside it.
    warm_up: Option<WarmUp>,
    /// The TLS connector being built in the background ([`crate::db::pool`]): the warm-up
    /// waits for it without blocking a runtime thread.
    tls: Option<super::background_tls::BackgroundTls>,
}

/// A warm-up in flight or done: whether its connect timed out (what it opened is in the pool).
type WarmUp = futures_util::future::Shared<futures_util::future::BoxFuture<'static, WarmedUp>>;

/// How a warm-up ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WarmedUp {
    /// Connected, or failed at once (refused, a bad login): a waiting get connects itself.
    Done,
    /// The database did not answer within the connect timeout: a get that waited for it
    /// answers that rather than waiting a second connect timeout.
    TimedOut,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("status", &self.inner.status())
            .field("session", &self.session)
            .finish()
    }
}

impl Pool {
    /// Wraps a deadpool pool.
    pub fn new(inner: deadpool_postgres::Pool, session: Session) -> Self {
        Self {
            inner,
            session: Arc::new(session),
            warm_up: None,
            tls: None,
        }
    }

    /// The same pool, knowing the TLS connector its manager uses (for [`Pool::warm`]).
    pub(crate) fn with_tls(mut self, tls: super::background_tls::BackgroundTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Opens the pool's first connection now, on a task of its own, and leaves it idle in the
    /// pool: a cold start connects (TCP, TLS, authentication) while the runtime fetches the
    /// first event instead of after it. The first [`Pool::get`] of this pool or its clones
    /// waits for the warm-up and takes that connection. When the warm-up's connect timed out,
    /// a get that was waiting for it fails with the pool's create timeout at once (a database
    /// that does not answer is not asked twice on one delivery's clock); after any other
    /// failure it connects itself. The warm-up's failure is logged at debug: the delivery's
    /// answer reports it. Needs a Tokio runtime.
    pub fn warm(mut self) -> Self {
        let inner = self.inner.clone();
        let tls = self.tls.clone();
        let task = tokio::spawn(async move {
            // The connect needs the TLS connector: wait for its build here, asleep, rather
            // than blocked inside the connect on a runtime thread the cold start needs.
            if let Some(tls) = tls {
                tls.ready().await;
            }
            match inner.get().await {
                Ok(_) => WarmedUp::Done,
                Err(error) => {
                    tracing::debug!(
                        error = %crate::error_chain::error_chain(&error),
                        "the warm-up connection failed"
                    );
                    match error {
                        deadpool_postgres::PoolError::Timeout(_) => WarmedUp::TimedOut,
                        _ => WarmedUp::Done,
                    }
                }
            }
        });
        let done: futures_util::future::BoxFuture<'static, WarmedUp> =
            Box::pin(async move { task.await.unwrap_or(WarmedUp::Done) });
        self.warm_up = Some(futures_util::FutureExt::shared(done));
        self
    }

    /// Waits, asleep, until the warm-up ([`Pool::warm`]) has opened its connection or failed;
    /// returns at once for a pool that was not warmed. By then the TLS connector's build is
    /// done and the thread that built it ([`super::pool`]) has exited: the receiver gives back
    /// the memory that build freed after this (functions/receiver/src/heap.rs).
    pub async fn warmed_up(&self) {
        if let Some(warm_up) = &self.warm_up {
            let _ = warm_up.clone().await;
        }
    }

    /// The same connections under other transaction limits (the worker's transactions take the
    /// handler timeout as their idle limit).
    pub fn with_session(&self, session: Session) -> Self {
        Self {
            inner: self.inner.clone(),
            session: Arc::new(session),
            warm_up: self.warm_up.clone(),
            tls: self.tls.clone(),
        }
    }

    /// This pool's session settings.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// A connection: an idle one (checked first), or a new one.
    ///
    /// # Errors
    /// [`deadpool_postgres::PoolError`] when none is free within the wait timeout or a new one
    /// cannot be opened.
    pub async fn get(&self) -> Result<Connection, deadpool_postgres::PoolError> {
        if let Some(warm_up) = &self.warm_up {
            if warm_up.peek().is_none() && warm_up.clone().await == WarmedUp::TimedOut {
                return Err(deadpool_postgres::PoolError::Timeout(
                    deadpool_postgres::TimeoutType::Create,
                ));
            }
        }
        Ok(Connection {
            client: self.inner.get().await?,
            session: self.session.clone(),
        })
    }
}

/// A pooled connection. Returned to the pool on drop; [`Connection::discard`] closes it instead.
pub struct Connection {
    client: deadpool_postgres::Object,
    session: Arc<Session>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Deref for Connection {
    type Target = tokio_postgres::Client;
    fn deref(&self) -> &Self::Target {
        &self.client
    }
}

/// A statement ready to send: prepared by name (cache on) or the text itself (cache off).
#[derive(Debug, Clone)]
pub enum Prepared {
    /// Prepared once per connection.
    Named(Statement),
    /// Sent unnamed with its types.
    Unnamed(&'static Sql),
}

impl Connection {
    /// Never returns this connection to the pool (it may be mid-statement or in a broken
    /// transaction); the server ends the session when the socket closes.
    pub fn discard(self) {
        let _ = deadpool_postgres::Object::take(self.client);
    }

    /// The session settings.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Opens a transaction with the session's limits: sent on first poll, so it can be pipelined
    /// (see `db::pipeline`) with the statements after it.
    pub fn begin(&self) -> impl Future<Output = Result<(), tokio_postgres::Error>> + '_ {
        self.client.batch_execute(&self.session.begin)
    }

    /// Makes `sql` ready to send. With the cache on this prepares it the first time per
    /// connection (one round trip, once); off, it costs nothing. Prepare every statement of a
    /// pipeline before sending any of them, or the prepare round trip breaks the order.
    ///
    /// # Errors
    /// `tokio_postgres::Error` when the prepare fails.
    pub async fn prepare(&self, sql: &'static Sql) -> Result<Prepared, tokio_postgres::Error> {
        if self.session.statement_cache {
            Ok(Prepared::Named(
                self.client
                    .prepare_typed_cached(sql.text, sql.types)
                    .await?,
            ))
        } else {
            Ok(Prepared::Unnamed(sql))
        }
    }

    /// Runs a prepared statement and collects its rows; its messages go out on the first poll.
    ///
    /// # Errors
    /// `tokio_postgres::Error` when the statement fails.
    pub async fn query(
        &self,
        statement: &Prepared,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        match statement {
            Prepared::Named(statement) => self.client.query(statement, params).await,
            Prepared::Unnamed(sql) => {
                self.client
                    .query_typed_raw(sql.text, typed(sql, params))
                    .await?
                    .try_collect()
                    .await
            }
        }
    }

    /// Runs a prepared statement and returns its first row, if any.
    ///
    /// # Errors
    /// `tokio_postgres::Error` when the statement fails.
    pub async fn query_opt(
        &self,
        statement: &Prepared,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, tokio_postgres::Error> {
        Ok(self.query(statement, params).await?.into_iter().next())
    }

    /// Runs a prepared statement and returns the number of rows it changed.
    ///
    /// # Errors
    /// `tokio_postgres::Error` when the statement fails.
    pub async fn execute(
        &self,
        statement: &Prepared,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, tokio_postgres::Error> {
        match statement {
            Prepared::Named(statement) => self.client.execute(statement, params).await,
            Prepared::Unnamed(sql) => {
                let stream = self
                    .client
                    .query_typed_raw(sql.text, typed(sql, params))
                    .await?;
                let mut stream = std::pin::pin!(stream);
                while stream.try_next().await?.is_some() {}
                Ok(stream.rows_affected().unwrap_or(0))
            }
        }
    }

    /// Runs one statement in its own transaction with the session's limits: `BEGIN ..`, the
    /// statement and `COMMIT` pipelined (one round trip). A failed statement makes `COMMIT` roll
    /// back; its error is returned. [`Connection::autocommit_all`] with one statement.
    ///
    /// # Errors
    /// `tokio_postgres::Error` when the statement or the transaction fails.
    pub async fn autocommit(
        &self,
        sql: &'static Sql,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let mut results = self.autocommit_all(&[(sql, params)]).await?;
        // One statement sent, one result back.
        results.pop().unwrap_or_else(|| Ok(Vec::new()))
    }

    /// Runs `statements` (each with its parameters), in order, in one transaction with the
    /// session's limits: `BEGIN ..`, every statement and `COMMIT` pipelined on this connection
    /// (one round trip, one commit, however many statements). Each statement's rows or error
    /// come back in the order given, one result per statement.
    ///
    /// All or nothing: once a statement fails the transaction is aborted, the statements after
    /// it fail too (SQLSTATE 25P02, `in_failed_sql_transaction`) and `COMMIT` rolls back, so
    /// nothing of the transaction is committed when a result is a database error (one with a
    /// SQLSTATE). Every result `Ok` means everything committed. An error without a SQLSTATE
    /// (the connection lost mid-way) leaves the outcome unknown, as for any statement.
    ///
    /// With the statement cache on, the first use of a statement on this connection prepares
    /// it after `BEGIN ..` went out, inside the transaction: parsing a statement locks the
    /// tables it names, and outside the transaction that wait would have no `lock_timeout` and
    /// no `statement_timeout` at all (a table another session holds would keep the delivery
    /// until the client deadline). Every statement is made ready before any is sent, so the
    /// prepares (a round trip each, once per connection) never break the pipeline's order.
    ///
    /// # Errors
    /// `tokio_postgres::Error` when `BEGIN`, a prepare or `COMMIT` fails: nothing is known to
    /// be committed then (a `COMMIT` that failed on a lost connection may have committed).
    pub async fn autocommit_all(
        &self,
        statements: &[(&'static Sql, &[&(dyn ToSql + Sync)])],
    ) -> Result<Vec<Result<Vec<Row>, tokio_postgres::Error>>, tokio_postgres::Error> {
        use super::pipeline::{all_in_order, in_order};
        let (begun, (sent, committed)) = in_order(self.begin(), async {
            let mut prepared = Vec::with_capacity(statements.len());
            for (sql, _) in statements {
                match self.prepare(sql).await {
                    Ok(statement) => prepared.push(statement),
                    // The prepare failed inside the transaction: COMMIT ends it (as a rollback).
                    Err(error) => return (Err(error), self.client.batch_execute("COMMIT").await),
                }
            }
            // Boxed: `all_in_order` polls each in place (they must be `Unpin`).
            let queries = prepared
                .iter()
                .zip(statements)
                .map(|(statement, (_, params))| Box::pin(self.query(statement, params)))
                .collect();
            let (results, committed) =
                in_order(all_in_order(queries), self.client.batch_execute("COMMIT")).await;
            (Ok(results), committed)
        })
        .await;
        begun?;
        let results = sent?;
        // A failed statement rolled the transaction back: its error is the answer, whatever
        // COMMIT said.
        if results.iter().all(Result::is_ok) {
            committed?;
        }
        Ok(results)
    }
}

impl Connection {
    /// Runs one statement on its own: sent alone (its own implicit transaction: one statement,
    /// one round trip) when the limits live on the database role, else as
    /// [`Connection::autocommit`] (`BEGIN` with the `SET LOCAL` limits, the statement, `COMMIT`:
    /// still one round trip), so it never runs without the limits.
    ///
    /// # Errors
    /// `tokio_postgres::Error` when the statement fails (nothing of it is committed then).
    pub async fn one_statement(
        &self,
        sql: &'static Sql,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        if self.session.limits_per_transaction() {
            return self.autocommit(sql, params).await;
        }
        let statement = self.prepare(sql).await?;
        self.query(&statement, params).await
    }
}

fn typed<'a>(
    sql: &'static Sql,
    params: &'a [&'a (dyn ToSql + Sync)],
) -> impl Iterator<Item = (&'a (dyn ToSql + Sync), Type)> + 'a {
    params
        .iter()
        .zip(sql.types.iter())
        .map(|(p, t)| (*p, t.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_carries_the_limits_unless_they_live_on_the_role() {
        let mut settings = DatabaseSettings::with_url("postgres://localhost/x");
        settings.lock_timeout_ms = 321;
        let session = Session::new(&settings);
        assert!(session
            .begin_sql()
            .starts_with("BEGIN; SET LOCAL statement_timeout = 5000;"));
        assert!(session
            .begin_sql()
            .contains("SET LOCAL lock_timeout = 321;"));
        settings.transaction_limits = false;
        assert_eq!(Session::new(&settings).begin_sql(), "BEGIN");
    }
}
