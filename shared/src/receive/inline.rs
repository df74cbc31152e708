//! The inline shape: claim the event and apply its handler in one transaction, answering with
//! the handler's response (or, for a fatal handler error, keeping the event `dead`); a lost
//! claim answers as a duplicate, in flight or a digest mismatch.

use super::outcome::Outcome;
use super::receiver::{Failed, Receiver};
use super::reply::{body_replayed, dry_run_reply, in_flight, replayed, Reply};
use crate::apply::{apply, fatal_body, ApplyError, FATAL_STATUS};
use crate::config::SourceConfig;
use crate::effect::Event;
use crate::ledger::{self, Claim, Expiry, NewEvent};
use crate::telemetry::MetricName;

impl Receiver {
    /// Inline mode on `conn`: the reply, and whether to ring the worker once `conn` is back
    /// in the pool (the commit queued outbox messages).
    pub(super) async fn claim_and_apply(
        &self,
        conn: &ledger::Connection,
        config: &SourceConfig,
        event: &Event<'_>,
        new_event: &NewEvent<'_>,
        expiry: &Expiry,
        shadow: bool,
    ) -> Result<(Reply, bool), Failed> {
        let claim = match self
            .one_statement(conn, config, event, new_event, expiry)
            .await?
        {
            Some(Ok(reply)) => return Ok((reply, false)),
            Some(Err(lost)) => lost,
            None => ledger::claim(conn, new_event, expiry).await?,
        };
        self.answer_claim(conn, config, event, new_event, expiry, claim, shadow)
            .await
    }

    /// Inline mode once `claim` is decided (by the transaction shape's claim, or lost in the
    /// one-statement shape): apply a won claim's handler and answer with its response; answer a
    /// lost one as a duplicate, in flight or a digest mismatch (running shadow mode's handler
    /// for a duplicate). The reply, and whether to ring the worker once `conn` is back in the
    /// pool.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn answer_claim(
        &self,
        conn: &ledger::Connection,
        config: &SourceConfig,
        event: &Event<'_>,
        new_event: &NewEvent<'_>,
        expiry: &Expiry,
        claim: Claim<'_>,
        shadow: bool,
    ) -> Result<(Reply, bool), Failed> {
        // Moved whole into the match (a binding left partly moved would be dropped, borrowing
        // `conn`, at the end of the function).
        let tx = match std::convert::identity(claim) {
            Claim::Won(tx) => tx,
            Claim::DigestMismatch => {
                return Ok((
                    Reply::error(
                        409,
                        Outcome::DigestMismatch,
                        "event id reused with a different body",
                    ),
                    false,
                ))
            }
            // Shadow mode: enforcement would skip this duplicate; process it anyway, but answer
            // what enforcement answers (a shadow run's failure is only logged: shadow mode must
            // not turn duplicates into 5xx in front of a live endpoint).
            Claim::Completed(stored) if shadow => {
                self.shadow_run(conn, config, event).await;
                return Ok((replayed(stored, Outcome::ShadowDuplicate), false));
            }
            Claim::InFlight if shadow => {
                self.shadow_run(conn, config, event).await;
                return Ok((in_flight(), false));
            }
            Claim::Completed(stored) => return Ok((replayed(stored, Outcome::Replayed), false)),
            Claim::InFlight => return Ok((in_flight(), false)),
            // Replay: the event is in the ledger already, whatever its status or bytes.
            Claim::Known(_) => return Ok((dry_run_reply(Outcome::Duplicate), false)),
            // A captured body sent again under another id or type: never processed, not even
            // in shadow mode (it is not a duplicate a naive receiver would see from the
            // provider).
            Claim::BodyReplayed(original) => {
                super::log::body_replayed(new_event, &original.event_id);
                // The stored response is the original row's: sealed (if it is) under its key.
                let original_id = original.event_id.clone();
                let reply = body_replayed(original);
                return Ok((self.opened(event.source, &original_id, reply).await?, false));
            }
        };
        // Boxed: the handler's and the completion's futures are large, and this one sits inside
        // every delivery's (and every replayed page's) future.
        match Box::pin(apply(
            &self.handlers,
            config,
            tx,
            event,
            self.sealing(config),
        ))
        .await
        {
            // Committed outbox messages: the worker forwards them now rather than at its next
            // schedule tick.
            Ok(applied) => Ok((
                Reply {
                    content_type: "application/json",
                    status: applied.response.status,
                    body: applied.response.body,
                    replayed: false,
                    retry_after: None,
                    outcome: applied.outcome.into(),
                },
                applied.queued > 0,
            )),
            Err(ApplyError::Fatal(error)) => Ok((
                self.keep_dead(conn, new_event, &error, expiry).await?,
                false,
            )),
            Err(error) => Err(Failed::Apply(error)),
        }
    }

    /// An inline handler failed fatally: the claim's transaction is rolled back; keep the event
    /// `dead` with its payload and error, tell the operator, and answer the provider a 2xx.
    async fn keep_dead(
        &self,
        conn: &ledger::Connection,
        new_event: &NewEvent<'_>,
        error: &crate::effect::HandlerError,
        expiry: &Expiry,
    ) -> Result<Reply, Failed> {
        let chain = error.chain();
        tracing::error!(
            source = new_event.source,
            event_id = new_event.event_id,
            event_type = new_event.event_type,
            metric = "handler_fatal",
            error = chain.as_str(),
            "handler failed fatally: the event is kept dead for an operator to fix and re-drive"
        );
        crate::telemetry::count(MetricName::HandlerFatal, new_event.source, 1);
        let body = fatal_body();
        match ledger::record_dead(conn, new_event, &chain, FATAL_STATUS, &body, expiry).await? {
            Some(stored) => Ok(Reply {
                content_type: "application/json",
                status: stored.status,
                body: stored.body,
                replayed: false,
                retry_after: None,
                outcome: Outcome::Dead,
            }),
            // Another delivery claimed the event after our rollback: answer as a duplicate.
            None => Ok(in_flight()),
        }
    }
}
