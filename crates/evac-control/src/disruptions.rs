//! What `evac control` tells an admin about disruptions. Beside a stock KubeVirt, evac's feature
//! gates are evac's alone: a gate left off means KubeVirt handles that disruption by itself (the
//! VM shuts down with its pod). So the choice is made visible: at start, which disruptions evac
//! acts on ([`gate_states`]); as they come, each launcher pod's disruption counted once by cause
//! and handling, and a gate found off logged once (`Tally`). The Warning event on the VMI is
//! the policy's effect (`RecordEvent`), carried out as any other.

use std::collections::HashSet;

use evac_cluster::{CoreReader, ObjectSource};
use evac_core::disruption::{self, CAUSE_AUDIT_ANNOTATION, GATES, HANDLING_AUDIT_ANNOTATION};
use evac_core::effect::EventReason;
use evac_core::kubevirt_config::KubeVirtConfig;
use evac_core::{Effect, ReadError};
use evac_evaluator::metrics::DisruptionLabels;
use evac_evaluator::{Evaluation, Metrics, PolicySet};
use serde_json::value::RawValue;

use crate::DISRUPTION_CAUSE;

/// One of evac's feature gates, as the KubeVirt CR in effect has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateState {
    /// The gate, e.g. `PreemptionEvictionLiveMigration`.
    pub gate: &'static str,
    /// The disruptions it turns into evacuations, in words.
    pub disruptions: &'static str,
    /// Whether it is on.
    pub on: bool,
}

/// The state of each of evac's gates in the KubeVirt CR the `disruption-cause` policy reads (its
/// `kubevirt` setting, or the CR in effect), read as the policy reads it.
pub fn gate_states(set: &PolicySet, source: &dyn ObjectSource) -> Result<Vec<GateState>, ReadError> {
    let settings = set
        .get(DISRUPTION_CAUSE)
        .and_then(|served| serde_json::from_str::<disruption::Settings>(served.active.settings.get()).ok())
        .unwrap_or_default();
    let config = KubeVirtConfig::read(settings.kubevirt.as_ref(), &CoreReader(source))?;
    Ok(GATES
        .iter()
        .map(|(gate, disruptions)| GateState { gate, disruptions, on: config.feature_gate_enabled(gate) })
        .collect())
}

/// What the gates mean, in one line each: printed by `evac control` at start.
pub fn describe(states: &[GateState]) -> Vec<String> {
    states
        .iter()
        .map(|state| {
            if state.on {
                format!("{}: evac migrates the VMs (feature gate {} is on)", state.disruptions, state.gate)
            } else {
                format!(
                    "{}: left to KubeVirt, the VMs shut down (feature gate {} is off; add it to the KubeVirt CR's \
                     spec.configuration.developerConfiguration.featureGates to turn it on)",
                    state.disruptions, state.gate
                )
            }
        })
        .collect()
}

/// Launcher pods' disruptions as `disruption-cause` handled them: each counted once by cause and
/// handling, and each gate found off logged once.
#[derive(Default)]
pub(crate) struct Tally {
    /// Pods (by uid) whose disruption was counted; forgotten when the pod is.
    counted: HashSet<String>,
    /// Warnings logged (their text).
    logged: HashSet<String>,
}

/// A pod's uid, from a disruption-cause request of the controller's (an UPDATE of the pod).
fn pod_uid(request: &RawValue) -> Option<String> {
    let request: serde_json::Value = serde_json::from_str(request.get()).ok()?;
    let pod = request.get("object").filter(|o| !o.is_null()).or_else(|| request.get("oldObject"))?;
    Some(pod.pointer("/metadata/uid")?.as_str()?.to_owned())
}

impl Tally {
    /// Counts what one evaluation of a pod's disruption says, once per pod: the first evaluation
    /// that names a handling counts. Returns the warnings to log (each once per process).
    pub(crate) fn observe(
        &mut self,
        request: &RawValue,
        evaluation: &Evaluation,
        metrics: &Metrics,
    ) -> Vec<String> {
        let Ok(response) = &evaluation.outcome else { return Vec::new() };
        let annotations = response.audit_annotations.as_ref();
        let annotation = |key: &str| annotations.and_then(|a| a.get(key)).cloned();
        let (Some(cause), Some(handling)) =
            (annotation(CAUSE_AUDIT_ANNOTATION), annotation(HANDLING_AUDIT_ANNOTATION))
        else {
            return Vec::new();
        };
        let Some(uid) = pod_uid(request) else { return Vec::new() };
        // A deleted pod is not seen again; bounded all the same, should deletions be missed.
        if self.counted.len() >= 100_000 {
            self.counted.clear();
        }
        if self.counted.insert(uid) {
            metrics.disruptions.get_or_create(&DisruptionLabels { cause, handling }).inc();
        }
        evaluation
            .effects
            .iter()
            .filter_map(|(effect, _)| match effect {
                Effect::RecordEvent { reason: EventReason::DisruptionLeftToKubeVirt, message, .. } => {
                    Some(message)
                }
                _ => None,
            })
            .filter(|message| self.logged.insert((*message).clone()))
            .cloned()
            .collect()
    }

    /// Forgets a pod that is gone.
    pub(crate) fn forget(&mut self, uid: &str) {
        self.counted.remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use evac_core::disruption::{NODE_PRESSURE_GATE, PREEMPTION_GATE};

    #[test]
    fn each_gate_is_described_with_where_it_goes() {
        let states = [
            GateState { gate: PREEMPTION_GATE, disruptions: "scheduler preemption", on: true },
            GateState { gate: NODE_PRESSURE_GATE, disruptions: "node pressure", on: false },
        ];
        let lines = describe(&states);
        assert_eq!(lines[0], "scheduler preemption: evac migrates the VMs (feature gate PreemptionEvictionLiveMigration is on)");
        assert!(lines[1].starts_with("node pressure: left to KubeVirt"), "{}", lines[1]);
        assert!(lines[1].contains("NodePressureEvictionLiveMigration is off"), "{}", lines[1]);
        assert!(lines[1].contains("spec.configuration.developerConfiguration.featureGates"), "{}", lines[1]);
    }

    #[test]
    fn a_pod_is_counted_once_and_a_gate_logged_once() {
        let metrics = Metrics::new(evac_evaluator::metrics::Process::Control);
        let mut tally = Tally::default();
        let request = |uid: &str| {
            RawValue::from_string(
                serde_json::json!({"operation": "UPDATE", "object": {"metadata": {"uid": uid}}}).to_string(),
            )
            .unwrap()
        };
        let message = disruption::gate_off_message(disruption::Cause::Preemption, PREEMPTION_GATE);
        let evaluation = |handling: &str| {
            let response = evac_core::PolicyResponse::from(
                evac_core::Decision::allow()
                    .with_audit_annotation(CAUSE_AUDIT_ANNOTATION, "preemption")
                    .with_audit_annotation(HANDLING_AUDIT_ANNOTATION, handling),
            );
            let event = Effect::RecordEvent {
                vmi: evac_core::ObjectRef::new("default", "vm"),
                node: "node01".into(),
                reason: EventReason::DisruptionLeftToKubeVirt,
                message: message.clone(),
            };
            Evaluation {
                policy: DISRUPTION_CAUSE.into(),
                mode: evac_evaluator::PolicyMode::Protect,
                version: "local@sha256:0".into(),
                digest: "sha256:0".into(),
                outcome: Ok(response),
                effects: vec![(event, evac_evaluator::EffectOutcome::Applied)],
            }
        };
        assert_eq!(tally.observe(&request("a"), &evaluation("gate-off"), &metrics), vec![message.clone()]);
        // The same pod again (a condition, then its deletion): not counted, not logged again.
        assert!(tally.observe(&request("a"), &evaluation("gate-off"), &metrics).is_empty());
        // Another pod: counted, the same warning not logged again.
        assert!(tally.observe(&request("b"), &evaluation("gate-off"), &metrics).is_empty());
        let count = |handling: &str| {
            metrics
                .disruptions
                .get_or_create(&DisruptionLabels { cause: "preemption".into(), handling: handling.into() })
                .get()
        };
        assert_eq!(count("gate-off"), 2);
        tally.forget("a");
        tally.observe(&request("a"), &evaluation("gate-off"), &metrics);
        assert_eq!(count("gate-off"), 3);
    }
}
