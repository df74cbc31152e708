//! Whether an address or a host name stays on this machine: the one rule behind every "plain
//! HTTP (or no TLS) only to loopback" check (provider API base URLs, the database warning, the
//! migrate function's test URLs, the local console's bind).

use std::net::IpAddr;

/// `ip` is a loopback address: 127.0.0.0/8, `::1`, or an IPv4-mapped loopback address
/// (`::ffff:127.0.0.1`).
pub fn is_loopback_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// `host` as written (a URL's host, a connection string's host; IPv6 with or without its
/// brackets) names this machine: `localhost` (any case) or a loopback address
/// ([`is_loopback_ip`]). No name is resolved.
pub fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(is_loopback_ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_and_addresses() {
        for host in [
            "localhost",
            "LOCALHOST",
            "127.0.0.1",
            "127.9.8.7",
            "::1",
            "[::1]",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "",
            "10.0.0.1",
            "0.0.0.0",
            "::",
            "db.example.com",
            "localhost.example.com",
            "[::2]",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
