//! Decisions and the response a policy module returns for them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Effect;

/// The HTTP status of every denial evac answers: `429 Too Many Requests`, which `kubectl drain`
/// and the descheduler read as "retry later" (a denial without a code reaches them as 400).
pub const TOO_MANY_REQUESTS: u16 = 429;

/// The HTTP status of a denial that is the policy's fault, not the request's: `500`, as a host
/// answers a policy that fails (a configuration error the cluster admin must fix).
pub const INTERNAL_ERROR: u16 = 500;

/// A decision's answer to the admission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Admit the request.
    Allow,
    /// Refuse the request.
    Deny {
        /// The HTTP status: [`TOO_MANY_REQUESTS`] for every denial [`Decision::deny`] makes,
        /// [`INTERNAL_ERROR`] for a misconfigured policy.
        code: u16,
        /// The reason, as the client sees it (KubeVirt's text, for the eviction decision).
        message: String,
    },
}

/// A verdict plus the effects a host must carry out for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request is admitted.
    pub verdict: Verdict,
    /// What the host must carry out, whatever the verdict (a denied eviction still marks the VMI).
    pub effects: Vec<Effect>,
    /// Recorded in the API server's audit log with the request (e.g. the disruption's cause).
    pub audit_annotations: BTreeMap<String, String>,
}

impl Decision {
    /// Admit, with no effects.
    pub fn allow() -> Self {
        Self { verdict: Verdict::Allow, effects: Vec::new(), audit_annotations: BTreeMap::new() }
    }

    /// A `429` denial.
    pub fn deny(message: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Deny { code: TOO_MANY_REQUESTS, message: message.into() },
            effects: Vec::new(),
            audit_annotations: BTreeMap::new(),
        }
    }

    /// The same denial with another HTTP status (an allow stays an allow).
    pub fn with_code(mut self, status: u16) -> Self {
        if let Verdict::Deny { code, .. } = &mut self.verdict {
            *code = status;
        }
        self
    }

    /// Adds an effect for the host to carry out.
    pub fn with_effect(mut self, effect: Effect) -> Self {
        self.effects.push(effect);
        self
    }

    /// Adds an audit annotation; the same key again replaces its value.
    pub fn with_audit_annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.audit_annotations.insert(key.into(), value.into());
        self
    }

    /// Whether the verdict is [`Verdict::Allow`].
    pub fn is_allowed(&self) -> bool {
        self.verdict == Verdict::Allow
    }
}

/// Kubewarden's ValidationResponse plus `effects`: what evac's modules return from `validate`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct PolicyResponse {
    /// `accepted`: whether the request is admitted.
    pub accepted: bool,
    /// `message`: the denial's reason, as the client sees it.
    #[serde(default)]
    pub message: Option<String>,
    /// `code`: the HTTP status of a denial (429 for evac's).
    #[serde(default)]
    pub code: Option<u16>,
    /// `warnings`: warnings returned to the client with the answer; evac sets none.
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
    /// `audit_annotations`: added to the API server's audit event of the request; `None` when empty.
    #[serde(default)]
    pub audit_annotations: Option<BTreeMap<String, String>>,
    /// `mutated_object`: the object as a mutating policy changed it; evac's policies never mutate.
    #[serde(default)]
    pub mutated_object: Option<serde_json::Value>,
    /// evac's addition: what the host must carry out; absent reads as none.
    #[serde(default)]
    pub effects: Vec<Effect>,
}

impl From<Decision> for PolicyResponse {
    fn from(decision: Decision) -> Self {
        let (accepted, message, code) = match decision.verdict {
            Verdict::Allow => (true, None, None),
            Verdict::Deny { code, message } => (false, Some(message), Some(code)),
        };
        Self {
            accepted,
            message,
            code,
            warnings: None,
            // None when empty: responses without annotations keep Kubewarden's `null`.
            audit_annotations: (!decision.audit_annotations.is_empty()).then_some(decision.audit_annotations),
            mutated_object: None,
            effects: decision.effects,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObjectRef;

    fn clear() -> Effect {
        Effect::ClearEvacuation { vmi: ObjectRef::new("default", "vm"), node: "node01".into() }
    }

    #[test]
    fn only_allow_is_allowed() {
        let rows = [
            ("allow", Decision::allow(), true),
            (
                "allow with effects and annotations",
                Decision::allow().with_effect(clear()).with_audit_annotation("k", "v"),
                true,
            ),
            ("deny", Decision::deny("Eviction request for target Pod"), false),
            ("deny with an effect", Decision::deny("no").with_effect(clear()), false),
            (
                "deny with another code",
                Decision {
                    verdict: Verdict::Deny { code: 500, message: "boom".into() },
                    ..Decision::allow()
                },
                false,
            ),
        ];
        for (row, decision, allowed) in rows {
            assert_eq!(decision.is_allowed(), allowed, "{row}");
        }
    }

    /// Kubewarden's ValidationResponse: a denial carries its message and code; audit annotations
    /// are `null` unless set; effects are listed in order.
    #[test]
    fn decisions_become_validation_responses() {
        let denied =
            Decision::deny("Eviction request for target Pod").with_effect(clear()).with_effect(clear());
        let response = PolicyResponse::from(denied);
        assert!(!response.accepted);
        assert_eq!(response.message.as_deref(), Some("Eviction request for target Pod"));
        assert_eq!(response.code, Some(TOO_MANY_REQUESTS));
        assert_eq!(response.effects, [clear(), clear()]);
        assert_eq!(response.audit_annotations, None);

        let allowed =
            Decision::allow().with_audit_annotation("evac.kubevirt.io/disruption-cause", "preemption");
        let response = PolicyResponse::from(allowed);
        assert!(response.accepted);
        assert_eq!((response.message, response.code), (None, None));
        assert_eq!(
            response.audit_annotations,
            Some(BTreeMap::from([("evac.kubevirt.io/disruption-cause".to_owned(), "preemption".to_owned())]))
        );
        assert!(response.effects.is_empty());
    }
}
