//! `chaos`: runs the scenarios and writes RELIABILITY.md.

fn main() {
    eprintln!("chaos: not built yet");
    std::process::exit(2);
}
