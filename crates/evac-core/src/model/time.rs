//! Kubernetes timestamps (RFC 3339, e.g. `2026-11-21T09:40:00Z`) as seconds since the Unix epoch.

/// Seconds since the epoch, or `None` when the text is not an RFC 3339 timestamp.
pub fn unix_seconds(timestamp: &str) -> Option<f64> {
    let parsed = chrono::DateTime::parse_from_rfc3339(timestamp).ok()?;
    Some(parsed.timestamp() as f64 + f64::from(parsed.timestamp_subsec_millis()) / 1000.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_kubernetes_timestamps() {
        assert_eq!(super::unix_seconds("1970-01-01T00:01:00Z"), Some(60.0));
        assert_eq!(super::unix_seconds("2026-11-21T09:40:00.500Z"), Some(1_795_254_000.5));
        assert_eq!(super::unix_seconds("yesterday"), None);
    }
}
