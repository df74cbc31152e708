//! The `replay` function of this repository's reference deployment (`ReplayFunction` in
//! template.yaml): hookledger's `replay` with this repository's handlers, the one call a team's
//! own binary makes too (the starter project's `src/bin/replay.rs`).

fn main() -> Result<(), hookledger::Error> {
    hookledger::replay::main(handlers::APP)
}
