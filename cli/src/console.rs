//! `hookledger console`: the ledger console (`hookledger_console`) on a local port, over the same
//! database and sources as every other command. Prints one line, `hookledger console:
//! http://ADDR/?token=TOKEN`, then serves until Ctrl-C or SIGTERM (requests in flight finish).
//!
//! The token is 32 random bytes from the OS (hex) unless `HOOKLEDGER_CONSOLE_TOKEN` is set (at
//! least 16 characters of `A-Z a-z 0-9 - _ . ~`). It is never logged; the request log (stderr,
//! `RUST_LOG=info`) names the method, route template, status and duration only.
//!
//! The console speaks plain HTTP: `--bind` to an address other than loopback is refused unless
//! `--allow-remote-http` says the operator has put TLS in front of it, or accepts the risk
//! ([`check_bind`]).

use shared::App;
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
    /// 127.0.0.1: the token is the only protection, and the connection is plain HTTP. An
    /// address other than loopback is refused without --allow-remote-http.
    #[arg(long, value_name = "ADDR", default_value = hookledger_console::DEFAULT_BIND)]
    pub(crate) bind: SocketAddr,
    /// Allow --bind to an address other than loopback (e.g. 0.0.0.0). The console is plain
    /// HTTP: the token, the cookie and every payload cross the network unencrypted unless a
    /// TLS proxy in front of it ends the connection on the same host. Prefer a tunnel
    /// (ssh -L 8470:127.0.0.1:8470 HOST).
    #[arg(long)]
    pub(crate) allow_remote_http: bool,
    /// No re-drive: the pages show no re-drive buttons, and POST /redrive answers 403.
    #[arg(long)]
    read_only: bool,
}

/// Whether the console may listen on `bind`: a loopback address (127.0.0.0/8, ::1, or an
/// IPv4-mapped loopback address) always, any other (including the unspecified 0.0.0.0 and ::,
/// which listen on every interface) only with `allow_remote_http`.
///
/// # Errors
/// Another address without `allow_remote_http`: the message names the address and the flag.
pub fn check_bind(bind: SocketAddr, allow_remote_http: bool) -> anyhow::Result<()> {
    if !shared::loopback::is_loopback_ip(bind.ip()) && !allow_remote_http {
        anyhow::bail!(
            "refusing --bind {bind}: not a loopback address, and the console speaks plain HTTP \
             (its token and the payloads would cross the network unencrypted); use 127.0.0.1 \
             and a tunnel, or pass --allow-remote-http behind a TLS proxy"
        );
    }
    Ok(())
}

/// Serves the console until Ctrl-C or SIGTERM.
///
/// # Errors
/// A malformed `HOOKLEDGER_CONSOLE_TOKEN`, an address that cannot be bound, a failing accept.
/// (`main` has refused a `--bind` [`check_bind`] refuses before the configuration is read.)
pub async fn run(app: App, settings: Settings, pool: Pool, args: Args) -> anyhow::Result<()> {
    let token = match std::env::var(TOKEN_VAR) {
        Ok(token) => AccessToken::new(&token).map_err(|e| anyhow::anyhow!("{TOKEN_VAR}: {e}"))?,
        Err(_) => AccessToken::random()?,
    };
    let handlers = app.handlers(&settings.sources)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_is_accepted_without_allow_remote_http() {
        for bind in [
            "127.0.0.1:8470",
            "127.1.2.3:0",
            "[::1]:8470",
            "[::ffff:127.0.0.1]:1",
        ] {
            let bind: SocketAddr = bind.parse().unwrap();
            assert!(check_bind(bind, false).is_ok(), "{bind}");
        }
        for bind in [
            "0.0.0.0:8470",
            "[::]:8470",
            "10.0.0.5:8470",
            "[2001:db8::1]:80",
        ] {
            let bind: SocketAddr = bind.parse().unwrap();
            let error = check_bind(bind, false).unwrap_err().to_string();
            assert!(error.contains("not a loopback address"), "{error}");
            assert!(error.contains("--allow-remote-http"), "{error}");
            assert!(check_bind(bind, true).is_ok(), "{bind}");
        }
    }
}
