//! `hookledger-examples`: hookledger's operator CLI (`cli::main`) with the example handlers on
//! every Stripe source and their tables, as the CLI tests (`tests/tests/cli/`) run it. The
//! reference deployment's own `hookledger` (handlers/src/bin/) is the same call with
//! `handlers::APP`.

fn main() -> std::process::ExitCode {
    cli::main(shared::App {
        registry: handlers::examples::registry,
        migrations: handlers::examples::migrations,
    })
}
