//! The one-statement shape (`ledger::one_statement`): an event whose effect can be planned
//! before the claim is claimed and completed in one statement.

use super::receiver::{Failed, Receiver};
use super::reply::Reply;
use crate::config::SourceConfig;
use crate::effect::Event;
use crate::ledger::one_statement::{Decided, Plan};
use crate::ledger::{self, Claim, Expiry, NewEvent};

impl Receiver {
    /// The one-statement shape (`ledger::one_statement`), when the event can take it: the reply
    /// of a won claim, the lost claim's outcome for the transaction shape's answers (a completed
    /// duplicate, in flight, a digest mismatch), or `None` to take the transaction shape.
    pub(super) async fn one_statement(
        &self,
        conn: &ledger::Connection,
        config: &SourceConfig,
        event: &Event<'_>,
        new_event: &NewEvent<'_>,
        expiry: &Expiry,
    ) -> Result<Option<Result<Reply, Claim<'static>>>, Failed> {
        if new_event.replayed {
            return Ok(None);
        }
        let Some((plan, outcome)) =
            crate::apply::plan(&self.handlers, config, conn, event, self.sealing(config)).await
        else {
            return Ok(None);
        };
        let decided =
            ledger::one_statement::claim_and_complete(conn, new_event, &plan, expiry).await?;
        Ok(answer(decided, &plan, outcome))
    }
}

/// What the one statement `decided` (for an event whose plan's outcome is `outcome`) answers:
/// the reply of a won claim, the lost claim's outcome for the transaction shape's answers, or
/// `None` to take the transaction shape. The one place a single event and a batch's pipelined
/// items turn a decision into an answer.
pub(super) fn answer(
    decided: Decided,
    plan: &Plan,
    outcome: crate::apply::Outcome,
) -> Option<Result<Reply, Claim<'static>>> {
    match decided {
        Decided::Won(response) => Some(Ok(Reply {
            content_type: "application/json",
            status: response.status,
            body: plan.answer_for(response.body),
            replayed: false,
            retry_after: None,
            outcome: outcome.into(),
        })),
        Decided::Completed(stored) => Some(Err(Claim::Completed(stored))),
        Decided::DigestMismatch => Some(Err(Claim::DigestMismatch)),
        Decided::InFlight => Some(Err(Claim::InFlight)),
        Decided::BodyReplayed(original) => Some(Err(Claim::BodyReplayed(original))),
        Decided::Undecided => None,
    }
}
