//! The `receiver` function of this repository's reference deployment (`ReceiverFunction` in
//! template.yaml): hookledger's `receiver` with this repository's handlers, the one call a team's
//! own binary makes too (the starter project's `src/bin/receiver.rs`).

fn main() -> Result<(), hookledger::Error> {
    hookledger::receiver::main(handlers::APP)
}
