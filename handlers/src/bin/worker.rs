//! The `worker` function of this repository's reference deployment (`WorkerFunction` in
//! template.yaml): hookledger's `worker` with this repository's handlers, the one call a team's
//! own binary makes too (the starter project's `src/bin/worker.rs`).

fn main() -> Result<(), hookledger::Error> {
    hookledger::worker::main(handlers::APP)
}
