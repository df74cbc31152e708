//! A handler whose write waits on a lock another session holds: the delivery ends once, within
//! the lock timeout (plus a round trip), with a retryable 503 and nothing left behind, in every
//! way the limits and statements can be sent; the provider's retry then applies it.

use std::time::{Duration, Instant};

use shared::Outcome;

use crate::helpers::*;

/// The lock timeout of these tests, the default (milliseconds).
const LOCK_TIMEOUT_MS: u64 = 2_000;

/// The `orders` table (the example Stripe handler's) locked as a whole, or the one order row
/// the delivery inserts held by another session's uncommitted insert.
const LOCKS: [&str; 2] = [
    "LOCK TABLE orders IN SHARE MODE",
    "INSERT INTO orders (order_id, total_minor, currency, source, event_id) \
     VALUES ('ord_locked', 1, 'usd', 'elsewhere', 'evt_elsewhere')",
];

#[tokio::test]
async fn a_handler_waiting_on_a_lock_ends_within_the_lock_timeout_once_with_a_retryable_503() {
    // (statement cache, limits with every transaction): the default, pgbouncer's, RDS Proxy's.
    for (cache, limits_per_transaction) in [(true, true), (false, true), (false, false)] {
        for lock in LOCKS {
            let case =
                format!("cache {cache}, limits per transaction {limits_per_transaction}, {lock:?}");
            let db = hookledger_tests::test_db().await.unwrap();
            let mut database = db.settings(2);
            database.lock_timeout_ms = LOCK_TIMEOUT_MS;
            database.statement_cache = cache;
            database.transaction_limits = limits_per_transaction;
            let client_deadline = database.client_deadline();
            if !limits_per_transaction {
                // What the deploy provisions on the receiver's login, here on the database.
                let client = db.connect().await.unwrap();
                let name: String = client
                    .query_one("SELECT current_database()", &[])
                    .await
                    .unwrap()
                    .get(0);
                client
                    .batch_execute(&format!(
                        "ALTER DATABASE \"{name}\" SET lock_timeout = {LOCK_TIMEOUT_MS}; \
                         ALTER DATABASE \"{name}\" SET statement_timeout = {}",
                        database.statement_timeout_ms
                    ))
                    .await
                    .unwrap();
            }
            let app = spawn_app_over(db, database);
            let holder = app.db.connect().await.unwrap();
            holder
                .batch_execute(&format!("BEGIN; {lock}"))
                .await
                .unwrap();
            let delivery = stripe_payment("evt_locked", "ord_locked", 2000, NOW);
            let started = Instant::now();
            let reply = app.receive("stripe", &delivery).await;
            let waited = started.elapsed();
            holder.batch_execute("ROLLBACK").await.unwrap();
            assert_eq!(
                (reply.status, reply.outcome),
                (503, Outcome::Unavailable),
                "{case}: {reply:?}"
            );
            // A generous bound for "once, at the lock timeout": a second wait on the same lock
            // is twice the lock timeout; no lock timeout at all is the client deadline.
            let bound = Duration::from_millis(LOCK_TIMEOUT_MS + 1_500);
            assert!(bound < client_deadline);
            assert!(
                waited < bound,
                "{case}: waited {waited:?}, not within the lock timeout ({LOCK_TIMEOUT_MS} ms) \
                 plus a round trip (the client deadline is {client_deadline:?})"
            );
            assert_eq!(app.ledger_rows().await, 0, "{case}: nothing left behind");
            // The provider's retry, the lock released: applied once.
            let retry = app.receive("stripe", &delivery).await;
            assert_eq!(
                (retry.status, retry.outcome),
                (200, Outcome::Processed),
                "{case}"
            );
            assert_eq!(app.order_rows().await, 1, "{case}");
        }
    }
}
