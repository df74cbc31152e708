//! The receiver's first connection opens while its cold start goes on (issue 29, item 3):
//! `shared::db::Pool::warm` connects on a task of its own, and the first `get` takes that
//! connection instead of opening a second one beside it.

use std::time::{Duration, Instant};

use shared::config::DatabaseSettings;
use tokio::net::TcpListener;

/// Client backends connected to the database `conn` is on (this test's own database).
async fn backends(conn: &shared::db::Connection) -> i64 {
    conn.query_one(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND backend_type = 'client backend'",
        &[],
    )
    .await
    .expect("pg_stat_activity")
    .get(0)
}

#[tokio::test]
async fn the_first_get_takes_the_warm_up_connection_instead_of_opening_another() {
    let db = hookledger_tests::test_db().await.expect("test database");
    let pool = shared::db::pool(&DatabaseSettings::with_url(&db.url))
        .expect("a pool")
        .warm();
    // Straight away, while the warm-up is still connecting: without the wait this get opens
    // a second connection.
    let conn = pool.get().await.expect("a connection");
    assert_eq!(backends(&conn).await, 1);
    drop(conn);
    // A clone (what each function's state holds) shares the pool and its one connection.
    let again = pool.clone().get().await.expect("a connection");
    assert_eq!(backends(&again).await, 1);
}

#[tokio::test]
async fn a_warm_up_that_cannot_connect_leaves_the_first_get_to_report_it() {
    // A port nothing listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let pool = shared::db::pool(&DatabaseSettings::with_url(format!(
        "postgres://hookledger@127.0.0.1:{port}/nothing"
    )))
    .expect("a pool")
    .warm();
    let started = std::time::Instant::now();
    let error = pool.get().await.expect_err("nothing to connect to");
    assert!(
        shared::error_chain::error_chain(&error).contains("refused"),
        "{}",
        shared::error_chain::error_chain(&error)
    );
    // Refused at once, twice (the warm-up, then the get's own connect): no wait on a timeout.
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

/// The database is unreachable at cold start (a listener that accepts and never speaks: a
/// blackholed path, a database mid-failover). Before `Pool::warm`, the first delivery's `get`
/// failed after one create timeout (`CONNECT_TIMEOUT_SECS`, 5 s). Now it first waits out the
/// warm-up's own create timeout, then starts a second one of its own.
#[tokio::test]
async fn a_warm_pool_does_not_make_the_first_get_wait_two_connect_timeouts() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let (stream, _) = listener.accept().await.expect("accept");
            held.push(stream);
        }
    });
    let settings = DatabaseSettings::with_url(format!(
        "postgres://u:p@127.0.0.1:{port}/db?sslmode=disable"
    ));
    let pool = shared::db::pool(&settings).expect("a pool").warm();
    // The runtime fetches the first event.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let got = pool.get().await;
    let waited = started.elapsed();
    assert!(got.is_err(), "nothing answers");
    assert!(
        waited < Duration::from_secs(shared::db::CONNECT_TIMEOUT_SECS + 1),
        "the first get failed after {waited:?}, not one connect timeout ({} s); the receiver's \
         client deadline ({:?} by default) fires first",
        shared::db::CONNECT_TIMEOUT_SECS,
        settings.client_deadline()
    );
}
