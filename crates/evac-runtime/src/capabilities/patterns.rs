//! `hostCapabilities`: which host capabilities a policy may call, as Kubewarden 1.36 reads the
//! field (kubewarden-controller `crates/policy-evaluator/src/host_capabilities.rs`,
//! `HostCapabilities::new` and `is_allowed`): exact capability paths (`kubernetes/get_resource`),
//! `<group>/*` for every capability under a known group, or `*` for all. No patterns allow nothing.
//! The errors are Kubewarden's words, so a file refused by one is refused alike by the other.

/// Every capability Kubewarden 1.36 knows, as `hostCapabilities` names them (`CAPABILITY_TREE`).
pub const KNOWN_CAPABILITIES: [&str; 11] = [
    "crypto/v1/is_certificate_trusted",
    "kubernetes/can_i",
    "kubernetes/get_resource",
    "kubernetes/list_resources_all",
    "kubernetes/list_resources_by_namespace",
    "net/v1/dns_lookup_host",
    "oci/v1/manifest_digest",
    "oci/v1/oci_manifest",
    "oci/v1/oci_manifest_config",
    "oci/v1/verify",
    "oci/v2/verify",
];

/// An invalid pattern, in Kubewarden's words (`HostCapabilitiesPatternError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// A `*` that is not a whole last segment.
    #[error("invalid pattern {0:?}: wildcard '*' must be the entire last path segment (e.g. 'oci/*'), not a partial match")]
    InvalidWildcard(String),
    /// An empty pattern.
    #[error("invalid pattern: pattern must not be empty")]
    Empty,
    /// A segment no capability has at its level.
    #[error("invalid pattern {pattern:?}: unknown segment {segment:?}, valid options at this level are: {valid_options}")]
    UnknownSegment {
        /// The pattern.
        pattern: String,
        /// The segment not known.
        segment: String,
        /// The segments known at that level, sorted, joined with `, `.
        valid_options: String,
    },
    /// A group without `/*`.
    #[error("invalid pattern {pattern:?}: not a complete capability path; use {suggestion:?} to allow all capabilities under it")]
    Incomplete {
        /// The pattern.
        pattern: String,
        /// The pattern with `/*`.
        suggestion: String,
    },
}

/// A policy's allowed capabilities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapabilityPatterns {
    /// `*`: every capability.
    AllowAll,
    /// Exact paths, and prefixes (`kubernetes/` for `kubernetes/*`).
    Some {
        /// Exact capability paths.
        exact: Vec<String>,
        /// Prefixes of `<group>/*` patterns, with their `/`.
        prefixes: Vec<String>,
    },
}

impl Default for CapabilityPatterns {
    /// No patterns: nothing allowed, as Kubewarden's default.
    fn default() -> Self {
        Self::Some { exact: Vec::new(), prefixes: Vec::new() }
    }
}

impl CapabilityPatterns {
    /// Checks each pattern as Kubewarden does; the first invalid one is the error.
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<Self, PatternError> {
        let (mut exact, mut prefixes) = (Vec::new(), Vec::new());
        for pattern in patterns {
            let pattern = pattern.as_ref().trim();
            if pattern.is_empty() {
                return Err(PatternError::Empty);
            }
            if pattern == "*" {
                return Ok(Self::AllowAll);
            }
            if pattern.contains('*') && !pattern.ends_with("/*") {
                return Err(PatternError::InvalidWildcard(pattern.to_owned()));
            }
            validate(pattern)?;
            match pattern.strip_suffix('*') {
                Some(prefix) => prefixes.push(prefix.to_owned()),
                None => exact.push(pattern.to_owned()),
            }
        }
        Ok(Self::Some { exact, prefixes })
    }

    /// Whether the capability `path` (`<namespace>/<operation>` of the waPC call) is allowed.
    pub fn allows(&self, path: &str) -> bool {
        match self {
            Self::AllowAll => true,
            Self::Some { exact, prefixes } => {
                exact.iter().any(|e| e == path) || prefixes.iter().any(|p| path.starts_with(p.as_str()))
            }
        }
    }
}

/// Walks `pattern`'s segments down the tree of known capabilities (`validate_against_tree`):
/// each must be known at its level, a `*` ends the walk, and the walk must end on a capability.
fn validate(pattern: &str) -> Result<(), PatternError> {
    let segments: Vec<&str> = pattern.split('/').collect();
    for (depth, segment) in segments.iter().enumerate() {
        let parent = &segments[..depth];
        if *segment == "*" {
            // `*` after a complete capability path: no options below it.
            if KNOWN_CAPABILITIES.contains(&parent.join("/").as_str()) {
                return Err(unknown(pattern, segment, parent));
            }
            return Ok(());
        }
        if !children(parent).contains(&segment.to_string()) {
            return Err(unknown(pattern, segment, parent));
        }
    }
    if KNOWN_CAPABILITIES.contains(&pattern) {
        Ok(())
    } else {
        Err(PatternError::Incomplete { pattern: pattern.to_owned(), suggestion: format!("{pattern}/*") })
    }
}

/// The segments known right below `parent`, sorted and distinct.
fn children(parent: &[&str]) -> Vec<String> {
    let mut children: Vec<String> = KNOWN_CAPABILITIES
        .iter()
        .filter_map(|capability| {
            let segments: Vec<&str> = capability.split('/').collect();
            (segments.len() > parent.len() && segments[..parent.len()] == *parent)
                .then(|| segments[parent.len()].to_owned())
        })
        .collect();
    children.sort();
    children.dedup();
    children
}

fn unknown(pattern: &str, segment: &str, parent: &[&str]) -> PatternError {
    PatternError::UnknownSegment {
        pattern: pattern.to_owned(),
        segment: segment.to_owned(),
        valid_options: children(parent).join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(pattern: &str) -> String {
        CapabilityPatterns::parse(&[pattern]).unwrap_err().to_string()
    }

    #[test]
    fn patterns_are_checked_in_kubewarden_s_words() {
        for valid in
            ["*", "kubernetes/*", "oci/*", "oci/v1/*", "net/v1/dns_lookup_host", " kubernetes/can_i "]
        {
            assert!(CapabilityPatterns::parse(&[valid]).is_ok(), "{valid}");
        }
        assert_eq!(error(""), "invalid pattern: pattern must not be empty");
        assert_eq!(
            error("oci/v1/oci_*"),
            r#"invalid pattern "oci/v1/oci_*": wildcard '*' must be the entire last path segment (e.g. 'oci/*'), not a partial match"#
        );
        assert_eq!(
            error("kubernetes/foo"),
            r#"invalid pattern "kubernetes/foo": unknown segment "foo", valid options at this level are: can_i, get_resource, list_resources_all, list_resources_by_namespace"#
        );
        assert_eq!(
            error("unknown/x"),
            r#"invalid pattern "unknown/x": unknown segment "unknown", valid options at this level are: crypto, kubernetes, net, oci"#
        );
        assert_eq!(
            error("*/oci"),
            r#"invalid pattern "*/oci": wildcard '*' must be the entire last path segment (e.g. 'oci/*'), not a partial match"#
        );
        assert_eq!(
            error("kubernetes"),
            r#"invalid pattern "kubernetes": not a complete capability path; use "kubernetes/*" to allow all capabilities under it"#
        );
        assert_eq!(
            error("oci/v1"),
            r#"invalid pattern "oci/v1": not a complete capability path; use "oci/v1/*" to allow all capabilities under it"#
        );
        assert_eq!(
            error("kubernetes/get_resource/*"),
            r#"invalid pattern "kubernetes/get_resource/*": unknown segment "*", valid options at this level are: "#
        );
    }

    #[test]
    fn matching() {
        let none = CapabilityPatterns::parse::<&str>(&[]).unwrap();
        assert!(!none.allows("kubernetes/get_resource"));
        assert_eq!(none, CapabilityPatterns::default());
        let all = CapabilityPatterns::parse(&["*", "not checked after a star"]).unwrap();
        assert!(all.allows("kubernetes/get_resource"));
        let some = CapabilityPatterns::parse(&["kubernetes/get_resource", "oci/*"]).unwrap();
        assert!(some.allows("kubernetes/get_resource"));
        assert!(!some.allows("kubernetes/list_resources_all"));
        assert!(some.allows("oci/v2/verify"));
        assert!(!some.allows("Kubernetes/get_resource"), "case-sensitive");
        let group = CapabilityPatterns::parse(&["kubernetes/*"]).unwrap();
        assert!(group.allows("kubernetes/list_resources_all"));
        assert!(!group.allows("kubernetesx/get_resource"));
    }
}
