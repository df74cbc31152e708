//! The receiver's first connection opens while its cold start goes on (issue 29, item 3):
//! `shared::db::Pool::warm` connects on a task of its own, and the first `get` takes that
//! connection instead of opening a second one beside it.

use shared::config::DatabaseSettings;

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
