//! The `console` function of this repository's reference deployment (`ConsoleFunction` in
//! template.yaml): hookledger's `console` with this repository's handlers, the one call a team's
//! own binary makes too (the starter project's `src/bin/console.rs`).

fn main() -> Result<(), hookledger::Error> {
    hookledger::console::main(handlers::APP)
}
