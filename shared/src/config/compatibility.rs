//! Settings that cannot work together, refused at start-up naming both: the worker's lease
//! against its batches' handler time and the outbox targets' timeouts, and the database limits
//! against each other.

use super::database::DatabaseSettings;
use super::error::ConfigError;
use super::sources::Sources;
use super::worker::WorkerSettings;

/// Every outbox target's longest dispatch (its timeout, plus the worker's one second of grace)
/// must end before the lease on its message does (`HOOKLEDGER_LEASE_SECS`): otherwise another
/// worker could lease the message again while the first is still sending it, and the target
/// would get it twice (with the same idempotency key, but needlessly).
///
/// # Errors
/// [`ConfigError::Incompatible`] naming the lease and the source's target.
pub fn check_dispatch_fits_lease(
    sources: &Sources,
    worker: &WorkerSettings,
) -> Result<(), ConfigError> {
    let lease = std::time::Duration::from_secs(worker.lease_secs);
    for source in sources.iter() {
        for target in &source.targets {
            let longest = target.timeout() + std::time::Duration::from_secs(1);
            if longest >= lease {
                return Err(ConfigError::Incompatible {
                    first: "HOOKLEDGER_LEASE_SECS",
                    second: "a target's timeout_ms",
                    rule: format!(
                        "the lease ({} s) must be longer than source {:?}'s target {:?}: its \
                         timeout ({} ms) plus 1 s",
                        worker.lease_secs,
                        source.name,
                        target.name,
                        target.timeout().as_millis()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Refuses settings that cannot work together, naming both.
///
/// - Every event of a batch must be able to run its full handler timeout before the batch's
///   lease expires (`HOOKLEDGER_WORKER_BATCH` x `HOOKLEDGER_HANDLER_TIMEOUT_MS` <
///   `HOOKLEDGER_LEASE_SECS`), or a later event's lease lapses before it starts and another
///   worker takes it over.
/// - `HOOKLEDGER_LOCK_TIMEOUT_MS` must be shorter than `HOOKLEDGER_STATEMENT_TIMEOUT_MS`: a
///   duplicate waiting on an in-flight claim must get its 409 from the lock timeout before the
///   statement timeout turns it into a 503.
/// - The receiver's transactions are bounded by `HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS`, and
///   it must be at least `HOOKLEDGER_STATEMENT_TIMEOUT_MS`, or a pipelined transaction waiting
///   on its own statement's answer could be cut. The worker's transactions take
///   `HOOKLEDGER_HANDLER_TIMEOUT_MS` as their idle limit instead (see `shared::work`), so a
///   handler's transaction is never killed by a session limit shorter than its own deadline.
///
/// # Errors
/// [`ConfigError::Incompatible`] naming the two settings.
pub fn check_compatible(
    database: &DatabaseSettings,
    worker: &WorkerSettings,
) -> Result<(), ConfigError> {
    if (worker.batch as u64) * worker.handler_timeout_ms >= worker.lease_secs * 1000 {
        return Err(ConfigError::Incompatible {
            first: "HOOKLEDGER_LEASE_SECS",
            second: "HOOKLEDGER_HANDLER_TIMEOUT_MS",
            rule: format!(
                "the lease ({} s) must be longer than HOOKLEDGER_WORKER_BATCH ({}) x the handler \
                 timeout ({} ms)",
                worker.lease_secs, worker.batch, worker.handler_timeout_ms
            ),
        });
    }
    if database.lock_timeout_ms >= database.statement_timeout_ms {
        return Err(ConfigError::Incompatible {
            first: "HOOKLEDGER_LOCK_TIMEOUT_MS",
            second: "HOOKLEDGER_STATEMENT_TIMEOUT_MS",
            rule: format!(
                "the lock timeout ({} ms) must be shorter than the statement timeout ({} ms)",
                database.lock_timeout_ms, database.statement_timeout_ms
            ),
        });
    }
    let deadline_ms = database.client_deadline().as_millis();
    if deadline_ms <= u128::from(database.lock_timeout_ms) {
        return Err(ConfigError::Incompatible {
            first: "HOOKLEDGER_DB_CLIENT_DEADLINE_MS",
            second: "HOOKLEDGER_LOCK_TIMEOUT_MS",
            rule: format!(
                "the client deadline ({deadline_ms} ms) must be longer than the lock timeout \
                 ({} ms), or an in-flight duplicate would never get its 409",
                database.lock_timeout_ms
            ),
        });
    }
    if database.idle_in_transaction_timeout_ms < database.statement_timeout_ms {
        return Err(ConfigError::Incompatible {
            first: "HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS",
            second: "HOOKLEDGER_STATEMENT_TIMEOUT_MS",
            rule: format!(
                "the idle-in-transaction timeout ({} ms) must be at least the statement timeout \
                 ({} ms)",
                database.idle_in_transaction_timeout_ms, database.statement_timeout_ms
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{env, GOOD};
    use crate::config::{ConfigError, Settings};

    #[test]
    fn settings_that_cannot_work_together_are_refused_naming_both() {
        let with = |vars: &[(&str, &str)]| {
            let mut all = vec![
                ("DATABASE_URL", "postgres://localhost/x"),
                ("HOOKLEDGER_SOURCES", GOOD),
            ];
            all.extend_from_slice(vars);
            Settings::from_lookup(env(&all))
        };
        assert!(with(&[]).is_ok(), "the defaults work together");
        let e = with(&[("HOOKLEDGER_HANDLER_TIMEOUT_MS", "130000")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("HOOKLEDGER_LEASE_SECS") && e.contains("HOOKLEDGER_HANDLER_TIMEOUT_MS"),
            "{e}"
        );
        let e = with(&[("HOOKLEDGER_LOCK_TIMEOUT_MS", "5000")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("HOOKLEDGER_LOCK_TIMEOUT_MS")
                && e.contains("HOOKLEDGER_STATEMENT_TIMEOUT_MS"),
            "{e}"
        );
        let e = with(&[("HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS", "4000")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS")
                && e.contains("HOOKLEDGER_STATEMENT_TIMEOUT_MS"),
            "{e}"
        );
        assert!(matches!(
            with(&[("HOOKLEDGER_DB_STATEMENT_CACHE", "maybe")]),
            Err(ConfigError::Number { .. })
        ));
        assert!(
            !with(&[("HOOKLEDGER_DB_STATEMENT_CACHE", "false")])
                .unwrap()
                .database
                .statement_cache
        );
        let e = with(&[("HOOKLEDGER_DB_CLIENT_DEADLINE_MS", "2000")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("HOOKLEDGER_DB_CLIENT_DEADLINE_MS")
                && e.contains("HOOKLEDGER_LOCK_TIMEOUT_MS"),
            "{e}"
        );
    }

    #[test]
    fn a_forward_target_whose_dispatch_can_outlive_the_lease_is_refused() {
        let sources = |timeout_ms: u64| {
            format!(
                r#"[{{"name": "a", "scheme": "github", "secrets": ["x"], "targets": [
                    {{"name": "svc", "type": "forward", "url": "https://svc.example/h",
                      "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                      "timeout_ms": {timeout_ms}}}]}}]"#
            )
        };
        let with = |timeout_ms: u64, lease: &str| {
            let json = sources(timeout_ms);
            Settings::from_lookup(env(&[
                ("DATABASE_URL", "postgres://localhost/x"),
                ("HOOKLEDGER_SOURCES", json.as_str()),
                ("HOOKLEDGER_LEASE_SECS", lease),
                ("HOOKLEDGER_WORKER_BATCH", "1"),
                ("HOOKLEDGER_HANDLER_TIMEOUT_MS", "1000"),
            ]))
        };
        assert!(with(60_000, "120").is_ok());
        let e = with(60_000, "61").unwrap_err().to_string();
        assert!(
            e.contains("HOOKLEDGER_LEASE_SECS") && e.contains("\"svc\"") && e.contains("60000"),
            "{e}"
        );
        let e = with(60_001, "600").unwrap_err().to_string();
        assert!(e.contains("timeout_ms must be 1 to 60000"), "{e}");
    }
}
