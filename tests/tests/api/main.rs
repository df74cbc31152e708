//! End-to-end tests of the receive path on real PostgreSQL (a fresh database per test).
//! Run them with `make test`, which starts a throwaway server and sets `DATABASE_URL`.

mod answers;
mod audit;
mod aws;
mod claim;
mod console;
mod deferred;
mod delivery_metrics;
mod deploy_regressions;
mod docs;
mod events;
mod half_open;
mod handlers_crate;
mod hardening;
mod helpers;
mod hostile;
mod interop;
mod migrate;
mod one_statement;
mod one_statement_hostile;
mod outbox;
mod outbox_review;
mod pooler;
mod receive;
mod redrive;
mod replay;
mod robustness;
mod roles;
mod scripts;
mod security;
mod sweep;
mod targets;
mod template;
mod worker_robustness;
