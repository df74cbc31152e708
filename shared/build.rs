//! Rebuilds `shared` when a migration is added or edited: `refinery::embed_migrations!`
//! (src/db.rs) reads `../migrations` at compile time, and cargo does not otherwise know that
//! the crate depends on that folder (a new `V<n>__*.sql` was silently missing from a warm
//! target directory). Cargo scans a directory given to `rerun-if-changed` recursively.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
