//! `hookledger console`: the ledger console (`hookledger_console`) on a local port, over the same
//! database and sources as every other command. Prints one line, `hookledger console:
//! http://ADDR/?token=TOKEN`, then serves until Ctrl-C or SIGTERM (requests in flight finish).
//!
//! The token is 32 random bytes from the OS (hex) unless `HOOKLEDGER_CONSOLE_TOKEN` is set (at
//! least 16 characters of `A-Z a-z 0-9 - _ . ~`). It is never logged; the request log (stderr,
//! `RUST_LOG=info`) names the method, route template, status and duration only.

use std::net::SocketAddr;

use hookledger_console::{AccessToken, Auth, Console, ConsoleConfig};
use shared::db::Pool;
use shared::doorbell::Doorbell;
use shared::Settings;

/// The variable that fixes the access token (else it is random per start).
pub const TOKEN_VAR: &str = "HOOKLEDGER_CONSOLE_TOKEN";

/// Options of `hookledger console`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (port 0: any free port, printed in the URL). Keep it on
    /// 127.0.0.1: the token is the only protection, and the connection is plain HTTP.
    #[arg(long, value_name = "ADDR", default_value = hookledger_console::DEFAULT_BIND)]
    bind: SocketAddr,
    /// No re-drive: the pages show no re-drive buttons, and POST /redrive answers 403.
    #[arg(long)]
    read_only: bool,
}

/// Serves the console until Ctrl-C or SIGTERM.
///
/// # Errors
/// A malformed `HOOKLEDGER_CONSOLE_TOKEN`, an address that cannot be bound, a failing accept.
pub async fn run(settings: Settings, pool: Pool, args: Args) -> anyhow::Result<()> {
    let token = match std::env::var(TOKEN_VAR) {
        Ok(token) => AccessToken::new(&token).map_err(|e| anyhow::anyhow!("{TOKEN_VAR}: {e}"))?,
        Err(_) => AccessToken::random()?,
    };
    let handlers = handlers::registry(&settings.sources);
    let doorbell = if args.read_only {
        Doorbell::off()
    } else {
        Doorbell::new(settings.worker_function.as_deref()).await
    };
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.bind))?;
    let console = Console::new(
        settings,
        pool,
        handlers,
        doorbell,
        ConsoleConfig {
            auth: Auth::Token(token),
            read_only: args.read_only,
        },
    );
    println!(
        "hookledger console: {}",
        console.url(listener.local_addr()?)
    );
    console.serve(listener, shutdown()).await?;
    Ok(())
}

/// Resolves at Ctrl-C or SIGTERM.
async fn shutdown() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
