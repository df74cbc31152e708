//! The `migrate` function of this repository's reference deployment (`MigrateFunction` in
//! template.yaml): hookledger's `migrate` with this repository's handlers, the one call a team's
//! own binary makes too (the starter project's `src/bin/migrate.rs`).

fn main() -> Result<(), hookledger::Error> {
    hookledger::migrate::main(handlers::APP)
}
