//! A batched delivery (SendGrid, HubSpot, Adyen, Meta): each item claimed on its own id, in
//! order, with a single event's exactly-once rules; the items that can take the one-statement
//! shape go to the ledger together, in one transaction and one round trip; the answer once
//! every item is durable.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use super::kept::Kept;
use super::log::Trace;
use super::outcome::Outcome;
use super::receiver::{event_of, expiry_now, Failed, Receiver};
use super::reply::Reply;
use crate::config::{Mode, SourceConfig};
use crate::ledger::one_statement::{
    claim_and_complete_all, Decided, Pipelined, Plan, MAX_PIPELINED,
};
use crate::ledger::{self, Expiry, LedgerError, NewEvent};
use hookledger_verify::extract::EventMeta;

/// A batch's items as identified: each event and what the ledger keeps of it, in the delivery's order.
type Items<'e> = [(EventMeta<'e>, Kept<'e>)];

/// How one item of a pipelined run is answered.
#[derive(Debug)]
enum Step {
    /// Decided by the pipelined transaction: the reply (or the failure) and whether to ring
    /// the worker, as `Receiver::process_one` would have had them.
    Answered(Result<(Reply, bool), Failed>),
    /// Not decided there: the item takes the per-item path (`Receiver::process_one`).
    OneByOne,
}

impl Receiver {
    /// A batch: each item claimed (or accepted) on its own id, in order, with the same
    /// exactly-once rules as a single event, its own bytes stored as its payload.
    ///
    /// The answer is 200 once every item is durable. An item that is a duplicate, a replayed
    /// body, a digest mismatch (logged and counted as for a single delivery) or dead does not
    /// stop the others. An item that cannot be made durable now (5xx, or 409 in flight) stops
    /// the batch there and is the answer, so the provider retries the batch: the items before
    /// it are durable and then duplicates, and only the rest is applied. Items after it may
    /// be durable too (a pipelined run commits as a whole before its items are answered);
    /// they are duplicates on the retry just the same.
    ///
    /// Inline, the items whose handlers are plain SQL (or which have no handler) are claimed
    /// and completed in runs of up to [`MAX_PIPELINED`]: one transaction and one round trip
    /// per run ([`Self::pipelined`]). An item the run cannot decide, and every item after a
    /// run that rolled back, takes the per-item path, as do a deferred source's, a shadow
    /// source's and a replayed batch's items.
    pub(super) async fn process_batch(
        &self,
        trace: &mut Trace<'_>,
        config: &SourceConfig,
        events: &Items<'_>,
        replayed: bool,
    ) -> Reply {
        let mut outcomes: BTreeMap<&'static str, usize> = Default::default();
        let summary = trace.detail.take();
        // Replay and shadow mode take the transaction shape anyway; deferred accepts are
        // their own statements.
        let mut pipelining = !replayed && !config.shadow && config.mode == Mode::Inline;
        let mut next = 0;
        while next < events.len() {
            let steps = if pipelining {
                let (steps, rolled_back) = self.pipelined(config, &events[next..]).await;
                // After a rollback the rest goes one by one: a batch whose items keep
                // failing costs what it did before, never a resend of the run per item.
                pipelining = !rolled_back;
                steps
            } else {
                vec![Step::OneByOne]
            };
            for step in steps {
                let Some((meta, kept)) = events.get(next) else {
                    break;
                };
                next += 1;
                let mut item = Trace {
                    source: trace.source,
                    event_id: None,
                    event_type: None,
                    key_index: trace.key_index,
                    detail: None,
                };
                let reply = match step {
                    Step::OneByOne => {
                        self.process_one(&mut item, config, meta, kept, &meta.document, replayed)
                            .await
                    }
                    Step::Answered(decided) => {
                        let (event, _) = event_of(config, meta, kept, &meta.document, replayed);
                        self.answer(&mut item, &event, decided).await
                    }
                };
                if let ControlFlow::Break(reply) =
                    item_answered(trace, meta, item, reply, &mut outcomes)
                {
                    return reply;
                }
            }
        }
        trace.detail = summary;
        // The batch's label in the log and the metrics: the first of these any item had (new
        // rows first), else `replayed` when every item was a completed duplicate.
        let outcome = [
            Outcome::Processed,
            Outcome::Accepted,
            Outcome::Ignored,
            Outcome::Dead,
        ]
        .into_iter()
        .find(|outcome| outcomes.contains_key(outcome.as_str()))
        .unwrap_or(
            if outcomes.len() == 1 && outcomes.contains_key(Outcome::Replayed.as_str()) {
                Outcome::Replayed
            } else {
                Outcome::Duplicate
            },
        );
        // What the provider expects once every item is durable: Adyen's `[accepted]`, else a
        // JSON summary.
        let answer = config
            .verifier
            .generic()
            .and_then(|model| model.batch.as_ref())
            .and_then(|batch| batch.answer.clone());
        let (content_type, body) = match answer {
            Some(text) => ("text/plain", text),
            None => (
                "application/json",
                serde_json::json!({ "events": events.len(), "outcomes": outcomes }).to_string(),
            ),
        };
        Reply {
            status: 200,
            content_type,
            body,
            // Every item a completed duplicate: the batch is a replay (`Idempotent-Replayed`).
            replayed: outcome == Outcome::Replayed,
            retry_after: None,
            outcome,
        }
    }

    /// The run at the front of `items` that takes the one-statement shape (each item's plan:
    /// `crate::apply::plan`; at most [`MAX_PIPELINED`]), claimed and completed in one
    /// transaction and one round trip ([`claim_and_complete_all`]) on one connection within
    /// the client deadline: a step for each item of the run, in order (at least one: a first
    /// item without a plan is one [`Step::OneByOne`]), and whether the run rolled back.
    ///
    /// A statement that fails rolls the run back. The items before it are then sent once more
    /// (a second round trip, or one by one if that fails too), the failed item is answered as
    /// the one statement alone answers its failure (in flight on a lock wait for its key, a
    /// 503 on any other lock wait: the per-item path would wait on the same lock again) or
    /// goes one by one (the transaction shape classifies a write the database refused), and
    /// the run ends there. A run whose transaction cannot say what it committed (`BEGIN` or
    /// `COMMIT` failed) goes one by one: the ledger answers whatever was committed as
    /// duplicates. No connection, or the client deadline passed: the first item's 503, which
    /// stops the batch.
    async fn pipelined(&self, config: &SourceConfig, items: &Items<'_>) -> (Vec<Step>, bool) {
        let expiry = expiry_now(config);
        let worked = crate::db::deadline::within(
            self.deadline,
            self.ready_connection(),
            async |conn: &ledger::Connection| {
                let mut plans = Vec::new();
                for (meta, kept) in items.iter().take(MAX_PIPELINED) {
                    let (event, _) = event_of(config, meta, kept, &meta.document, false);
                    match crate::apply::plan(&self.handlers, config, conn, &event, self.sealing(config)).await {
                        Some(plan) => plans.push(plan),
                        None => break,
                    }
                }
                if plans.is_empty() {
                    return Ok((vec![Step::OneByOne], false));
                }
                let run: Vec<(NewEvent<'_>, &Plan)> = items
                    .iter()
                    .zip(&plans)
                    .map(|((meta, kept), (plan, _))| {
                        (event_of(config, meta, kept, &meta.document, false).1, plan)
                    })
                    .collect();
                let answer = async |decided: Vec<Result<Decided, LedgerError>>| {
                    let mut steps = Vec::with_capacity(decided.len());
                    for (at, decided) in decided.into_iter().enumerate() {
                        steps.push(self.step(conn, config, items, &plans, &expiry, at, decided).await);
                    }
                    steps
                };
                Ok(match claim_and_complete_all(conn, &run, &expiry).await {
                    Ok(Pipelined::Committed(decided)) => (answer(decided).await, false),
                    Ok(Pipelined::RolledBack { at, decided }) => {
                        let before = match run.get(..at) {
                            Some(before) if !before.is_empty() => {
                                Some(claim_and_complete_all(conn, before, &expiry).await)
                            }
                            _ => None,
                        };
                        let mut steps = match before {
                            None => Vec::new(),
                            Some(Ok(Pipelined::Committed(before))) => answer(before).await,
                            Some(Ok(Pipelined::RolledBack { .. }) | Err(_)) => {
                                (0..at).map(|_| Step::OneByOne).collect()
                            }
                        };
                        steps.push(self.step(conn, config, items, &plans, &expiry, at, decided).await);
                        (steps, true)
                    }
                    Err(error) => {
                        tracing::warn!(
                            source = config.name.as_str(),
                            items = run.len(),
                            error = crate::error_chain::error_chain(&error).as_str(),
                            "a pipelined batch run did not say what it committed: its items go one by one"
                        );
                        ((0..run.len()).map(|_| Step::OneByOne).collect(), true)
                    }
                })
            },
        )
        .await;
        match worked {
            Ok(Ok(run)) => run,
            Ok(Err(failed)) => (vec![Step::Answered(Err(failed))], true),
            Err(exceeded) => (
                vec![Step::Answered(Err(Failed::Deadline(exceeded.to_string())))],
                true,
            ),
        }
    }

    /// The step of the run's item `at`, whose statement `decided`: answered as a single
    /// event's one statement is (`super::one_statement::answer`, then `Self::answer_claim`
    /// for a lost claim, or for the transaction shape's claim when undecided).
    #[allow(clippy::too_many_arguments)]
    async fn step(
        &self,
        conn: &ledger::Connection,
        config: &SourceConfig,
        items: &Items<'_>,
        plans: &[(Plan, crate::apply::Outcome)],
        expiry: &Expiry,
        at: usize,
        decided: Result<Decided, LedgerError>,
    ) -> Step {
        let (Some((meta, kept)), Some((plan, outcome))) = (items.get(at), plans.get(at)) else {
            return Step::OneByOne;
        };
        let decided = match decided {
            Ok(decided) => decided,
            Err(error) => return Step::Answered(Err(error.into())),
        };
        let (event, new_event) = event_of(config, meta, kept, &meta.document, false);
        let claim = match super::one_statement::answer(decided, plan, *outcome) {
            Some(Ok(reply)) => return Step::Answered(Ok((reply, false))),
            Some(Err(lost)) => lost,
            // Undecided: the transaction shape's claim on this connection, as a single event's
            // `claim_and_apply` takes it (the one statement has already run: planning and
            // sending it again would only be undecided again).
            None => match ledger::claim(conn, &new_event, expiry).await {
                Ok(claim) => claim,
                Err(error) => return Step::Answered(Err(error.into())),
            },
        };
        Step::Answered(
            self.answer_claim(conn, config, &event, &new_event, expiry, claim, false)
                .await,
        )
    }
}

/// Records a batch item's `reply`: its "batch item" log line when it is not a plain success,
/// and its outcome in `outcomes`; [`ControlFlow::Break`] with the batch's answer when the item
/// cannot be made durable now (5xx, or 409 in flight), naming it in the batch's `trace`.
fn item_answered(
    trace: &mut Trace<'_>,
    meta: &EventMeta<'_>,
    item: Trace<'_>,
    reply: Reply,
    outcomes: &mut BTreeMap<&'static str, usize>,
) -> ControlFlow<Reply> {
    if item.detail.is_some() || reply.status >= 300 {
        tracing::info!(
            source = trace.source,
            event_id = meta.event_id.as_ref(),
            event_type = meta.event_type.as_ref(),
            outcome = reply.outcome.as_str(),
            status = reply.status,
            detail = item.detail.as_deref().unwrap_or(""),
            "batch item"
        );
    }
    if reply.status >= 500 || reply.outcome == Outcome::InFlight {
        trace.event_id = Some(meta.event_id.clone().into_owned());
        trace.event_type = Some(meta.event_type.clone().into_owned());
        trace.detail = item.detail;
        return ControlFlow::Break(reply);
    }
    *outcomes.entry(reply.outcome.as_str()).or_default() += 1;
    ControlFlow::Continue(())
}
