//! The two text formats a Prometheus scraper may ask for, and the choice between them.
//!
//! `prometheus-client` writes OpenMetrics 1.0. A scraper that does not ask for it (by `Accept`)
//! gets Prometheus' text format 0.0.4, which differs in a few lines only: a counter's `# TYPE`
//! and `# HELP` name its `_total` sample, an info metric is a gauge named `_info`, there are no
//! `# UNIT` lines and no `# EOF`.

/// OpenMetrics' content type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Prometheus' text format's content type.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether an `Accept` header prefers OpenMetrics: it names `application/openmetrics-text` with a
/// quality above zero, and at least that of any `text/plain` or wildcard it names (Prometheus
/// sends both, OpenMetrics first: `application/openmetrics-text;version=1.0.0;q=0.5,...,
/// text/plain;version=0.0.4;q=0.3,*/*;q=0.2`).
pub fn accepts_openmetrics(accept: &str) -> bool {
    let mut openmetrics = 0.0f32;
    let mut text = 0.0f32;
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let quality = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .and_then(|(_, v)| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        match media.as_str() {
            "application/openmetrics-text" => openmetrics = openmetrics.max(quality),
            "text/plain" | "text/*" | "*/*" => text = text.max(quality),
            _ => {}
        }
    }
    openmetrics > 0.0 && openmetrics >= text
}

/// OpenMetrics text as Prometheus' text format 0.0.4.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut families: Vec<(&str, &str)> = Vec::new();
    // Collect each family's type first: `# HELP` comes before `# TYPE`.
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some((name, kind)) = rest.split_once(' ') {
                families.push((name, kind));
            }
        }
    }
    let kind_of = |name: &str| families.iter().find(|(n, _)| *n == name).map(|(_, k)| *k);
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let comment = line
            .strip_prefix("# HELP ")
            .map(|r| ("HELP", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("TYPE", r)));
        let Some((keyword, rest)) = comment else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
        let (sample, kind) = match kind_of(name) {
            Some("counter") => (format!("{name}_total"), "counter"),
            Some("info") => (format!("{name}_info"), "gauge"),
            Some("unknown") => (name.to_owned(), "untyped"),
            Some(kind) => (name.to_owned(), kind),
            None => (name.to_owned(), "untyped"),
        };
        let text = if keyword == "TYPE" { kind } else { text };
        out.push_str(&format!("# {keyword} {sample} {text}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Prometheus 2 and 3 send, what `curl` sends, and what a client asking for either
    /// format alone sends.
    #[test]
    fn the_accept_header_chooses_the_format() {
        let rows = [
            (
                "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
                true,
            ),
            (
                "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
                true,
            ),
            ("*/*", false),
            ("text/plain", false),
            ("text/plain;version=0.0.4", false),
            ("application/openmetrics-text", true),
            ("Application/OpenMetrics-Text; version=1.0.0", true),
            ("application/openmetrics-text;q=0, text/plain", false),
            ("text/plain;q=0.9, application/openmetrics-text;q=0.5", false),
            ("application/json", false),
            ("", false),
        ];
        for (accept, openmetrics) in rows {
            assert_eq!(accepts_openmetrics(accept), openmetrics, "{accept}");
        }
    }

    #[test]
    fn openmetrics_becomes_the_text_format() {
        let openmetrics = "# HELP evac_policy_evaluations Admission requests evaluated.\n\
# TYPE evac_policy_evaluations counter\n\
evac_policy_evaluations_total{policy=\"pod-eviction\"} 3\n\
# HELP evac_build Build.\n\
# TYPE evac_build info\n\
evac_build_info{version=\"0.1.0\"} 1\n\
# HELP evac_holds Holds now.\n\
# TYPE evac_holds gauge\n\
evac_holds 2\n\
# HELP evac_latency_seconds Latency.\n\
# TYPE evac_latency_seconds histogram\n\
# UNIT evac_latency_seconds seconds\n\
evac_latency_seconds_sum 0.5\n\
evac_latency_seconds_count 1\n\
evac_latency_seconds_bucket{le=\"+Inf\"} 1\n\
# EOF\n";
        let text = to_prometheus_text(openmetrics);
        assert_eq!(
            text,
            "# HELP evac_policy_evaluations_total Admission requests evaluated.\n\
# TYPE evac_policy_evaluations_total counter\n\
evac_policy_evaluations_total{policy=\"pod-eviction\"} 3\n\
# HELP evac_build_info Build.\n\
# TYPE evac_build_info gauge\n\
evac_build_info{version=\"0.1.0\"} 1\n\
# HELP evac_holds Holds now.\n\
# TYPE evac_holds gauge\n\
evac_holds 2\n\
# HELP evac_latency_seconds Latency.\n\
# TYPE evac_latency_seconds histogram\n\
evac_latency_seconds_sum 0.5\n\
evac_latency_seconds_count 1\n\
evac_latency_seconds_bucket{le=\"+Inf\"} 1\n"
        );
    }
}
