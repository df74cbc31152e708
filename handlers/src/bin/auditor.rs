//! The `auditor` function of this repository's reference deployment (`AuditorFunction` in
//! template.yaml): hookledger's `auditor` with this repository's handlers, the one call a team's
//! own binary makes too (the starter project's `src/bin/auditor.rs`).

fn main() -> Result<(), hookledger::Error> {
    hookledger::auditor::main()
}
