#![no_main]
//! `cargo fuzz run settings_env`: see hookledger_fuzzing::settings_env (fuzzing/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzzing::settings_env(data));
