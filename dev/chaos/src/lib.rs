//! `make chaos`: the receiver and the worker as real separate processes (several receiver
//! processes, as several Lambda execution environments would be), against a throwaway
//! PostgreSQL, driven by a provider simulator, under the faults a Lambda receiver and its
//! database really meet. Each scenario counts events sent, attempts, 2xx received, business
//! effects, outbox messages received, duplicates, lost events and the longest wait, and passes
//! only when every event acknowledged with a 2xx has exactly one effect, nothing acknowledged
//! is lost and no process panicked. The results go to `RELIABILITY.md`.
//!
//! Loopback only; bounded in time and request count.
//!
//! # The pieces
//!
//! - [`lambda`]: the Lambda Runtime API front. [`lambda::Fleet`] = N execution environments
//!   of one binary (`chaos-receiver` or `chaos-worker`), each a real process with its own
//!   Runtime API port; [`lambda::Fleet::invoke`] queues for an idle one (bounded), returns an
//!   [`lambda::Outcome`] (`status()` = what API Gateway would answer: the function's
//!   `statusCode`, 502 when it died or errored, 504 on its timeout, 429 when throttled).
//!   [`lambda::Environment::kill`] / `freeze` / `thaw` return the invocation they interrupted
//!   ([`lambda::InFlight`], with its [`lambda::Tag`] = source and event id). A process that
//!   exits is restarted by itself (a fresh environment); [`lambda::Fleet::panics`] and
//!   [`lambda::Fleet::unexpected_exits`] are what the pass rule reads. The Runtime API server
//!   and the API Gateway events ([`lambda_sim::HttpApiEvent`]) are the dev-only `lambda_sim`
//!   crate's, shared with `bench-cold`.
//! - [`cluster`]: the durable throwaway PostgreSQL (`scripts/postgres.sh`), its data dir and
//!   `pg_ctl` (for restarts: [`cluster::Cluster::as_owner`] runs it as the owner), and one
//!   migrated database per scenario ([`cluster::Cluster::database`]) with `chaos_effects`.
//! - [`simulator`]: the provider: signs each attempt afresh, retries every non-2xx or timeout
//!   with backoff and jitter until a 2xx (or the per-event bound: lost), N senders per event.
//! - [`verify`]: effects per event and ledger status from the database; the pass rule.
//! - [`report`]: [`report::ScenarioReport`] (the figures), `<out>/<name>.json`,
//!   RELIABILITY.md.
//! - [`handlers`]: `charge.refunded` (plain SQL) and `invoice.paid` (transaction shape,
//!   `CHAOS_HANDLER_SLEEP_MS`) write `chaos_effects` rows with no unique constraint.
//! - [`rng`]: the seeded xorshift for shuffles, jitter and fault timing.
//!
//! # Writing a scenario
//!
//! One file in `src/scenarios/`, one line in [`scenarios::all`]:
//!
//! ```text
//! pub struct MyScenario;
//! #[async_trait::async_trait]
//! impl Scenario for MyScenario {
//!     fn name(&self) -> &'static str { "my_scenario" }
//!     fn title(&self) -> &'static str { "what it does, one line" }
//!     async fn run(&self, ctx: &Context) -> anyhow::Result<ScenarioReport> {
//!         let db = ctx.database(self.name()).await?;            // fresh, migrated
//!         let env = ctx.function_env(&db, DEFAULT_SOURCES, &[("CHAOS_REPLY_DELAY_MS", "30")]);
//!         let fleet = ctx.receiver_fleet(self.name(), ctx.receivers, env).await?;
//!         let sim = Simulator::new(fleet.clone(), secrets_of(DEFAULT_SOURCES));
//!         let events: Vec<SimEvent> = /* SimEvent::stripe(...) */;
//!         // inject faults from a spawned task: fleet.environments[i].kill(), ...
//!         let records = sim.run(&events, 1, 32, ctx.seed).await;
//!         let check = verify::check_effects(&db.connect().await?, &records).await?;
//!         let mut report = ScenarioReport::from_run(self.name(), self.title(),
//!                                                   &totals(&records), &check);
//!         report.faults.insert("kills".into(), 20);
//!         let (panics, exits) = process_findings(&fleet);
//!         fleet.shutdown().await;
//!         report.finish(panics, exits);                         // decides `pass`
//!         Ok(report)
//!     }
//! }
//! ```
//!
//! A deferred scenario also starts `ctx.worker_fleet(...)` and invokes it with
//! [`lambda::scheduled_event`]; its own sources JSON (targets) replaces `DEFAULT_SOURCES`
//! (the simulator signs with [`simulator::secrets_of`] of it). `report.finish` must be called
//! after the fleets' last fault; `main` stamps the date, command and writes the files.

pub mod cluster;
pub mod handlers;
pub mod lambda;
pub mod postgres_control;
pub mod proxy;
pub mod report;
pub mod rng;
pub mod scenarios;
pub mod simulator;
pub mod target;
pub mod verify;
