//! `hookledger`: the operator's tools, running the same `shared` code as the functions against
//! any `DATABASE_URL` (and the same sources: `HOOKLEDGER_SOURCES`, `HOOKLEDGER_SOURCES_FILE` or
//! `HOOKLEDGER_SOURCES_SECRET_ARN`; `migrate` needs only the database). `console` serves the
//! ledger console (`hookledger_console`) instead of printing a report.
//!
//! Each command prints a readable summary, or with `--json` the same report the function
//! returns. Log lines and progress bars go to stderr (`RUST_LOG`, default `warn`; bars only on
//! a terminal and never with `--json`). Exit status 0 on success; on failure 1 (2 for a usage
//! error) with one line on stderr: `hookledger: <reason>`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use shared::App;

mod args;
mod audit;
mod console;
mod forget;
mod inspect;
mod migrate;
mod progress;
mod redrive;
mod reencrypt;
mod rejected;
mod replay;
mod stuck;
mod sweep;

/// hookledger's operator CLI.
#[derive(Debug, Parser)]
#[command(name = "hookledger", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply the pending migrations to the database (DATABASE_URL or HOOKLEDGER_DB_SECRET_ARN).
    Migrate(migrate::Args),
    /// Read the configuration exactly as the functions do at cold start and print, per source,
    /// the event types with a handler and the built-in targets; or the error they would stop
    /// with. A handler registered for a source that is not configured, or a source where
    /// nothing runs, is a warning (with --strict, a failure: for CI).
    CheckConfig(migrate::CheckArgs),
    /// Pull a window of events back from the provider's API (Stripe, Paddle) through the claim
    /// path, or ask GitHub to redeliver what the ledger lacks; never runs an event twice.
    Replay(replay::Args),
    /// Put dead letters (by id, or by when they went dead) back to `claimed` for the worker;
    /// with --ignored, re-run events that completed as `ignored` before their type had a
    /// handler; with --outbox, send dead outbox messages again (same idempotency keys).
    Redrive(redrive::Args),
    /// Erase one event's payload, stored response, last error, history values and outbox
    /// payloads (--event-id), or every event of a data subject's (--subject, through the
    /// source's `subject` hash): the key, digests and times stay, so a retry is still answered
    /// as a duplicate. Unfinished events keep their payload and are listed. Asks before it
    /// erases (--yes does not; --dry-run only counts).
    Forget(forget::Args),
    /// Seal a source's stored payloads again under the current master key (after configuring a
    /// new HOOKLEDGER_KMS_KEY_ID or local key, so the old one can be retired), and seal the
    /// payloads it stored in the clear before `encrypt_payload` was on; in bounded batches,
    /// resumable with --after.
    Reencrypt(reencrypt::Args),
    /// Show one ledger row: status, outcome (processed, ignored, stale, or the status), attempts,
    /// last error, times, stored response, whether it was replayed, and its history.
    Inspect(inspect::Args),
    /// List the stuck claims and expired leases the auditor reports, oldest first.
    Stuck(stuck::Args),
    /// Delete expired ledger keys now, in bounded batches (what the sweeper function does).
    Sweep(sweep::Args),
    /// Report stuck claims, idle transactions, retention, dead letters, backlog and quiet
    /// sources (what the auditor function reports).
    Audit(audit::Args),
    /// Count the deliveries the receiver refused, per source and reason (unauthorized,
    /// unknown_source, too_large, digest_mismatch, bad_request) and when each was last seen,
    /// over a window (--since, default 24h); unknown sources count as one, `(unknown)`.
    Rejected(rejected::Args),
    /// Serve the ledger console, a small web UI, on 127.0.0.1:8470: prints
    /// `hookledger console: http://ADDR/?token=TOKEN` and serves until Ctrl-C or SIGTERM.
    ///
    /// Pages: / (overview: events per minute by status, the auditor's figures), /events
    /// (filters, keyset pages), /events/SOURCE/EVENT_ID (timeline, response, payload, outbox),
    /// /stuck, /dead (with re-drive behind a confirmation), /rejected (refused deliveries).
    /// The token (random, or HOOKLEDGER_CONSOLE_TOKEN) is needed on every page: the printed
    /// URL sets a cookie.
    #[command(verbatim_doc_comment)]
    Console(console::Args),
}

/// Prints a command's report on stdout: with `--json` (`json`) the report as one line of JSON
/// (what the function returns for the same request), else `text()`, the summary for people.
///
/// # Errors
/// When the report cannot be serialised.
pub(crate) fn print_report(
    json: bool,
    report: &impl serde::Serialize,
    text: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(report)?);
    } else {
        println!("{}", text().trim_end());
    }
    Ok(())
}

/// `error` and its causes on one line: `outer: cause: root cause`.
fn one_line(error: &anyhow::Error) -> String {
    format!("{error:#}")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A configuration error as the functions print it at start-up
/// (`shared::startup::config_failure`): its own words, with only the causes that quote no value
/// (a JSON parser's message would quote the value, which may be a secret).
pub(crate) fn config_error(error: shared::config::ConfigError) -> anyhow::Error {
    anyhow::anyhow!(shared::startup::config_failure(&error))
}

async fn run(app: App, command: Command) -> anyhow::Result<()> {
    match command {
        Command::Migrate(args) => return migrate::run(app, args).await,
        Command::CheckConfig(args) => return migrate::check_config(app, args).await,
        // Refused before the configuration is read or the database reached.
        Command::Console(ref args) => console::check_bind(args.bind, args.allow_remote_http)?,
        _ => {}
    }
    let settings = shared::Settings::from_env().await.map_err(config_error)?;
    let pool = shared::db::pool(&settings.database)?;
    match command {
        Command::Migrate(_) | Command::CheckConfig(_) => Ok(()),
        Command::Replay(args) => replay::run(app, &settings, &pool, args).await,
        Command::Redrive(args) => redrive::run(app, &settings, &pool, args).await,
        Command::Forget(args) => forget::run(&settings, &pool, args).await,
        Command::Reencrypt(args) => reencrypt::run(&settings, &pool, args).await,
        Command::Inspect(args) => inspect::run(&settings, &pool, args).await,
        Command::Stuck(args) => stuck::run(&settings, &pool, args).await,
        Command::Sweep(args) => sweep::run(&settings, &pool, args).await,
        Command::Audit(args) => audit::run(&settings, &pool, args).await,
        Command::Rejected(args) => rejected::run(&settings, &pool, args).await,
        Command::Console(args) => console::run(app, settings, pool, args).await,
    }
}

/// Runs the `hookledger` CLI with `app`'s handlers (for `replay`, `redrive --ignored` and the
/// console's re-drive) and tables (for `migrate`): parses the command line, runs the command,
/// prints its report. A binary's `main` is this one call: `cli::main(my_handlers::APP)`.
///
/// Returns the process's exit status: 0 on success; 1 on failure, with one line on stderr
/// (`hookledger: <reason>`); 2 for a usage error.
pub fn main(app: App) -> ExitCode {
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(cli_main(app)),
        Err(error) => {
            eprintln!("hookledger: cannot start the async runtime: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn cli_main(app: App) -> ExitCode {
    // An operator's AWS profile, SSO session or assumed role, not only the environment.
    shared::aws::use_shared_config_files();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let subscriber = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, never into a file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .finish();
    // tokio-postgres's debug lines carry statement parameters: capped at info, as the
    // functions cap them.
    tracing_subscriber::util::SubscriberInitExt::init(
        tracing_subscriber::layer::SubscriberExt::with(subscriber, shared::telemetry::cap()),
    );
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help, --version, and the help a bare `hookledger` prints (exit status 2).
        Err(error)
            if !error.use_stderr()
                || error.kind()
                    == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            error.exit()
        }
        Err(error) => {
            // clap's reason comes before the usage and the hint, which --help repeats.
            let rendered = error.to_string();
            let reason = rendered
                .lines()
                .take_while(|line| {
                    !line.starts_with("Usage:") && !line.starts_with("For more information")
                })
                .flat_map(str::split_whitespace)
                .collect::<Vec<_>>()
                .join(" ");
            let reason = reason.strip_prefix("error: ").unwrap_or(&reason);
            eprintln!("hookledger: {reason} (see --help)");
            return ExitCode::from(2);
        }
    };
    match run(app, cli.command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("hookledger: {}", one_line(&error));
            ExitCode::FAILURE
        }
    }
}
