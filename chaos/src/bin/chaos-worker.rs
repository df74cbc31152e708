//! `chaos-worker`: the worker function under the harness's Lambda Runtime API.

fn main() {
    eprintln!("chaos-worker: not built yet");
    std::process::exit(2);
}
