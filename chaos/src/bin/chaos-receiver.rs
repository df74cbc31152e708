//! `chaos-receiver`: the receiver function under the harness's Lambda Runtime API.

fn main() {
    eprintln!("chaos-receiver: not built yet");
    std::process::exit(2);
}
