//! Giving the memory the process freed back to the system.
//!
//! The pool's TLS connector is built on a thread of its own (`shared::db::pool`), so a cold
//! start does not wait for it. glibc gives that thread an allocator arena of its own, and the
//! build leaves most of it free: native-tls parses the system trust store (about 140
//! certificates) and, with a CA file or the compiled-in RDS CAs, drops it again. Nothing else
//! allocates from that arena, and glibc returns an arena's free memory to the kernel only from
//! its top, so about 0.8 MiB stayed resident for the life of the execution environment
//! (`bench-cold`'s `RssAnon`, dev/bench/results/cold.md; issue 29). [`release_freed_memory`]
//! runs once, when the pool's first connection is open (`shared::db::Pool::warmed_up`): not as
//! soon as the connector is ready, because until the building thread has exited, glibc's
//! per-thread cache still holds some of the freed blocks, and each pins its page (about half the
//! memory stayed in `bench-cold` runs that trimmed then).

/// Returns the whole pages of memory the C allocator holds free, in every arena, to the kernel
/// (glibc's `malloc_trim(0)`), and says whether any went back. Elsewhere than on glibc it does
/// nothing and returns `false`. Live allocations are untouched. It locks each arena in turn,
/// briefly: call it once, after a burst of freeing, not per delivery.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_freed_memory() -> bool {
    // SAFETY: malloc_trim takes no pointer and works under glibc's own arena locks, so it is
    // sound at any time, from any thread.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// See the glibc version: nothing to do elsewhere (musl, other systems).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_freed_memory() -> bool {
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// `RssAnon` of this process, KiB.
    fn rss_anon_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// What the TLS build does, larger: a thread of its own allocates 16 MiB in small blocks
    /// (below glibc's mmap threshold, so they come from its arena), keeps the last one,
    /// which pins the arena's top, and frees the rest. That memory stays resident until
    /// [`release_freed_memory`] gives it back.
    #[test]
    fn memory_a_finished_thread_freed_goes_back_to_the_system() {
        let pinned = std::thread::spawn(|| {
            let mut blocks: Vec<Vec<u8>> = (0..4096).map(|i| vec![i as u8; 4096]).collect();
            let last = blocks.pop();
            drop(blocks);
            last
        })
        .join()
        .unwrap();
        let before = rss_anon_kib();
        assert!(release_freed_memory(), "glibc gave nothing back");
        let after = rss_anon_kib();
        assert!(
            before.saturating_sub(after) >= 8 * 1024,
            "RssAnon {before} KiB before, {after} KiB after"
        );
        drop(pinned);
    }
}
