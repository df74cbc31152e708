//! The `sweeper` function of this repository's reference deployment (`SweeperFunction` in
//! template.yaml): hookledger's `sweeper` with this repository's handlers, the one call a team's
//! own binary makes too (the starter project's `src/bin/sweeper.rs`).

fn main() -> Result<(), hookledger::Error> {
    hookledger::sweeper::main()
}
