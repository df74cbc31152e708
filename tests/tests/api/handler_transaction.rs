//! What a handler may not do through its transaction (`Tx`): end it (`COMMIT`, also behind a
//! comment) or set session state (`SET`, `set_config`, `DEALLOCATE`). The event is dead with
//! "may not run", nothing the handler wrote commits, and the next delivery on the same session
//! sees the server's defaults.

use shared::Outcome;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use shared::db::Sql;
use shared::ledger::Tx;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};

use crate::helpers::*;
use crate::worker_leases::{create_effects_table, effects, register, RECORD_EFFECT};

static COMMIT: Sql = Sql {
    text: "COMMIT",
    types: &[],
};

static SESSION_SET: Sql = Sql {
    text: "SET statement_timeout = 0",
    types: &[],
};

/// Writes an order through the Tx, then runs a statement a handler may not run (one that ends
/// the transaction or sets session state).
struct Committer(&'static Sql);

#[async_trait::async_trait]
impl Handler for Committer {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let effect = handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await?;
        tx.execute(self.0, &[]).await?;
        Ok(effect)
    }
}

#[tokio::test]
async fn a_handler_cannot_commit_or_set_session_state_through_its_transaction() {
    for (n, sql) in [&COMMIT, &SESSION_SET].into_iter().enumerate() {
        let mut app = spawn_app().await;
        app.state.receiver.handlers.register(
            "stripe",
            "payment_intent.succeeded",
            Arc::new(Committer(sql)),
        );
        let id = format!("evt_commit_{n}");
        let reply = app
            .receive("stripe", &stripe_payment(&id, &id, 5, NOW))
            .await;
        assert_eq!(reply.outcome, Outcome::Dead, "{reply:?}");
        assert_eq!(app.order_rows().await, 0, "{}: nothing committed", sql.text);
        let (_, _, error) = row(&app, &id).await;
        assert!(error.unwrap().contains("may not run"));
    }
}

static HIDDEN_COMMIT: Sql = Sql {
    text: "/* a comment first */ COMMIT",
    types: &[],
};

static CR_COMMIT: Sql = Sql {
    text: "-- a comment ended by a carriage return\rCOMMIT",
    types: &[],
};

/// Records one effect, then tries to commit it itself (which would make it durable whatever
/// the lease or the claim says), then fails retryably the first time.
struct CommitsThenFails {
    commit: &'static Sql,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl Handler for CommitsThenFails {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        tx.execute(&RECORD_EFFECT, &[&event.event_id]).await?;
        if call == 0 {
            tx.execute(self.commit, &[]).await?;
            return Err(HandlerError::retryable("downstream failed after the write"));
        }
        Ok(Effect::ok(serde_json::json!({"ok": true})))
    }
}

#[tokio::test]
async fn a_commit_behind_a_comment_is_refused_and_cannot_double_a_deferred_effect() {
    for (n, commit) in [&HIDDEN_COMMIT, &CR_COMMIT].into_iter().enumerate() {
        let app = spawn_app().await;
        create_effects_table(&app).await;
        let mut worker = worker_for(&app);
        register(
            &mut worker,
            Arc::new(CommitsThenFails {
                commit,
                calls: AtomicUsize::new(0),
            }),
        );
        let id = format!("evt_sneaky_{n}");
        let delivery = deferred(payment_intent_body(&id, &id, 1));
        assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);
        let summary = worker.worker.drain(SystemTime::now, plenty).await.unwrap();
        assert_eq!(summary.dead, 1, "{:?}: {summary:?}", commit.text);
        assert_eq!(
            effects(&app, &id).await,
            0,
            "nothing committed by the handler"
        );
        let (status, _, error) = row(&app, &id).await;
        assert_eq!(status, "dead");
        assert!(error.unwrap().contains("may not run"));
    }
}

static SESSION_OFF: Sql = Sql {
    text: "SELECT set_config('application_name', 'hijacked', false)",
    types: &[],
};

static DEALLOCATE: Sql = Sql {
    text: "DEALLOCATE ALL",
    types: &[],
};

#[tokio::test]
async fn session_state_set_from_a_handler_is_refused_and_never_reaches_the_next_delivery() {
    for (n, sql) in [&SESSION_OFF, &DEALLOCATE].into_iter().enumerate() {
        // One pooled connection: the next delivery gets the same session.
        let mut app = spawn_app_with(1, 2_000).await;
        app.state.receiver.handlers.register(
            "stripe",
            "payment_intent.succeeded",
            Arc::new(Committer(sql)),
        );
        let id = format!("evt_session_{n}");
        let reply = app
            .receive("stripe", &stripe_payment(&id, &id, 5, NOW))
            .await;
        assert_eq!(reply.outcome, Outcome::Dead, "{}: {reply:?}", sql.text);
        // The next, unrelated delivery on the same session works with the server's defaults.
        let next = app
            .receive(
                "github",
                &github(&format!("gh-{n}"), "ping", r#"{"zen":"x"}"#),
            )
            .await;
        assert_eq!(next.status, 200, "{next:?}");
        let conn = app.receiver().pool.get().await.unwrap();
        let setting: String = conn
            .query_one("SELECT current_setting('application_name')", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(setting, "hookledger");
    }
}
