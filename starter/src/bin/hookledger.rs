//! The `hookledger` operator CLI (migrate, check-config, inspect, redrive, replay, console, ...),
//! with our handlers.

fn main() -> std::process::ExitCode {
    hookledger::cli::main(webhooks::APP)
}
