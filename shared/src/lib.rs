//! hookledger's core: everything the Lambda functions share.
//!
//! The functions under `functions/` only translate events and errors; configuration, database
//! access, signature verification, the ledger (every SQL statement on `webhook_event`) and the
//! business handlers live here.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod app;
pub mod apply;
pub mod audit;
pub mod aws;
pub mod config;
pub mod coverage;
pub mod db;
pub mod doorbell;
pub mod effect;
pub mod error_chain;
pub mod expression;
pub mod forget;
pub mod github_app;
pub mod handler;
pub mod https;
pub mod invocation;
pub mod ledger;
pub mod loopback;
pub mod ordering;
pub mod outbox;
pub mod prelude;
pub mod privacy;
pub mod rds_ca;
pub mod receive;
pub mod redrive;
pub mod reencrypt;
pub mod rejected;
pub mod replay;
pub mod retention;
pub mod retry_after;
pub mod secrets;
pub mod sources_refresh;
pub mod sql_handler;
pub mod startup;
pub mod status;
pub mod sweep;
pub mod telemetry;
pub mod timestamp;
pub mod work;

pub use app::App;
pub use config::{Settings, SourceConfig, Sources};
pub use receive::{Outcome, Receiver, Reply};
