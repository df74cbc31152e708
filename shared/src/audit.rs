//! The audit: what needs a human, per source, every five minutes. Read-only on the ledger; one
//! `audit` log line and one CloudWatch EMF document per source ([`AuditReport::emit`]).
//!
//! Figures per source (all ages in whole seconds before the audit's `now`):
//!
//! | metric | unit | meaning |
//! |---|---|---|
//! | `stuck_claims` | Count | `claimed` rows claimed more than `stuck_after_secs` ago, plus `processing` rows whose lease has expired |
//! | `stuck_oldest_age` | Seconds | the oldest of them: since `claimed_at` (a claim) or `lease_expires_at` (a lease); 0 when none |
//! | `oldest_key_age` | Seconds | the oldest key still in the ledger (any status); absent when the source has none |
//! | `past_retention` | Count | keys the sweeper should have deleted: `completed` claimed before the retention cutoff plus `dead` dead before the dead-letter cutoff |
//! | `past_retention_overdue` | Count | the same, more than [`SWEEP_GRACE`] (an hour) past the cutoffs: keys a sweeper running every five minutes would have deleted; nonzero means the sweep stalled or falls behind |
//! | `dead_letters` | Count | `dead` rows |
//! | `dead_letters_new` | Count | rows that went dead since the last recorded run |
//! | `dead_letter_oldest_age` | Seconds | since the oldest `dead_at`; 0 when none |
//! | `ordering_ties_new` | Count | ordering ties seen since the last recorded run (resolved or not) |
//! | `backlog_due` | Count | `claimed` and `failed` rows whose `next_attempt_at` has come |
//! | `backlog_oldest_age` | Seconds | since the oldest due `next_attempt_at`; 0 when none |
//! | `outbox_backlog` | Count | outbox messages not yet delivered nor dead (pending, waiting for a retry, or being dispatched) |
//! | `outbox_backlog_oldest_age` | Seconds | since the oldest of them was committed; 0 when none |
//! | `outbox_dead` | Count | dead outbox messages (a fatal answer, or `max_attempts` used): `hookledger redrive --outbox` |
//! | `outbox_dead_new` | Count | outbox messages that went dead since the last recorded run |
//! | `outbox_dead_oldest_age` | Seconds | since the oldest dead outbox message went dead; 0 when none |
//! | `source_quiet` | Count | 1 when the source has `expected_interval_minutes` and its newest key is older than that (or it has none), else 0; only for sources with the setting |
//!
//! and for the database (dimension `source` = `*`): `idle_in_transaction_sessions` (Count) and
//! `idle_in_transaction_longest` (Seconds), sessions on this database `idle in transaction` (or
//! `(aborted)`) longer than `idle_in_transaction_after_secs`. Their ages come from the server's
//! clock (pg_stat_activity cannot be judged against an injected one). A role that is neither a
//! superuser nor a member of `pg_read_all_stats` (`pg_monitor`) sees only its own sessions.
//!
//! Sources: every source with keys in the ledger or messages in the outbox (configured or not; an unconfigured one is
//! judged with the default retention and has no horizon or expected interval) and every
//! configured source (one without keys reports zeros, and is quiet if it expects traffic).
//!
//! **Since the last run.** `audit_run` holds the time of the last recorded run; a run counts
//! over `[last_run_at, now)`, then records `now`, in the same transaction that read it, so
//! consecutive runs tile time and two concurrent runs take turns. The first run counts over
//! [`FIRST_RUN_WINDOW`] before `now` (the schedule's period), as if a run had happened then:
//! the totals show what was there before. [`peek`] reads the same figures without recording
//! (the CLI's default, so a manual audit does not take a window away from the function's
//! alarms). A row that goes dead in a transaction that commits after an audit has read may be
//! missed by `dead_letters_new` (not by `dead_letters`).
//!
//! **Caps.** Counts over sets that grow with a failure (stuck claims, backlog, past retention,
//! dead letters, the outbox backlog and dead messages) are taken over at most [`CAP`] rows, oldest first, so the audit stays fast on
//! a ledger of ten million rows; a count equal to [`CAP`] is reported `capped` and means "at
//! least". The stuck-claim, backlog and outbox-backlog caps are over all sources together (their indexes are
//! not per source): when capped, a source whose rows are all newer than the first `CAP` may
//! show 0.
//!
//! The run, its report and the stuck list are in `job`; the statements it runs, each beside the
//! one function that runs it, in [`sql`] (and the sweep's own for the sources present and their
//! oldest keys, [`crate::sweep::sql`]).

mod job;
pub mod sql;

pub use job::{
    peek, run, stuck_list, AuditReport, IdleInTransaction, SourceAudit, SourceStuck, StuckKey,
    StuckList, CAP, DATABASE_DIMENSION, FIRST_RUN_WINDOW, IDLE_PIDS_LOGGED, STUCK_KEYS_LOGGED,
    SWEEP_GRACE,
};
