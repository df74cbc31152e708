//! End-to-end tests of the receive path on real PostgreSQL (a fresh database per test).
//! Run them with `make test`, which starts a throwaway server and sets `DATABASE_URL`.

mod answers;
mod audit;
mod aws;
mod claim;
mod console;
mod deferred;
mod delivery_metrics;
mod events;
mod half_open;
mod handlers_crate;
mod helpers;
mod hostile;
mod interop;
mod layout;
mod logs;
mod migrate;
mod migrate_concurrency;
mod one_statement;
mod one_statement_equivalence;
mod outbox;
mod pooler;
mod receive;
mod redrive;
mod replay;
mod roles;
mod scripts;
mod security;
mod source_changes;
mod sweep;
mod targets;
mod template;
mod worker_drain;
mod worker_leases;
