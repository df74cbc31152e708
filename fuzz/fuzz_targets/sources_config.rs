#![no_main]
//! `cargo fuzz run sources_config`: see hookledger_fuzzing::sources_config (fuzzing/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzzing::sources_config(data));
