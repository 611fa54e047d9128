//! evac in a browser page, through wasm-bindgen, with no server: the policies' decisions made by
//! the policy crates' own functions (the code their Kubewarden modules run), and the simulator's
//! scenarios run in the page.
//!
//! - [`decide`](decide::decide): one AdmissionRequest through one policy over pasted cluster
//!   objects, with the response, its effects and a trace of the checks;
//! - [`scenario`]: a scenario with KubeVirt alone and with evac side by side (evac's own
//!   pipeline and controller, the policies [`linked`] in), the reports and their pictures;
//! - [`examples`]: the examples the page opens with.
//!
//! The JavaScript functions (`decide`, `runScenario`, `examples`, `example`, `scenarioExample`)
//! take and return text (JSON), which keeps the boundary to one shape the page and the tests both
//! read.
//!
//! An application crate, like the host: it depends on the simulator and the policy crates, and
//! must not depend on the host or wasmtime (the page runs no wasm runtime of its own).

#![cfg_attr(not(test), warn(clippy::too_many_lines))]
#![warn(missing_docs)]

pub mod decide;
pub mod examples;
pub mod linked;
mod reads;
pub mod scenario;
#[cfg(test)]
mod tests;

use wasm_bindgen::prelude::wasm_bindgen;

/// An input the page cannot use, in words for the person who typed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebError(pub String);

impl WebError {
    /// An error saying `why`.
    pub fn new(why: impl Into<String>) -> Self {
        Self(why.into())
    }
}

impl std::fmt::Display for WebError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WebError {}

fn json<T: serde::Serialize>(value: &T) -> Result<String, wasm_bindgen::JsError> {
    serde_json::to_string(value).map_err(|e| wasm_bindgen::JsError::new(&e.to_string()))
}

fn js(error: WebError) -> wasm_bindgen::JsError {
    wasm_bindgen::JsError::new(&error.0)
}

/// Decides a request with a policy (`pod-eviction`, `disruption-cause`, `evacuation`); returns
/// `{response, trace, reads}` as JSON. `now` is seconds since the Unix epoch.
#[wasm_bindgen(js_name = decide)]
pub fn decide_js(
    policy: &str,
    request: &str,
    objects: &str,
    settings: &str,
    now: f64,
) -> Result<String, wasm_bindgen::JsError> {
    let policy = decide::policy(policy).map_err(js)?;
    json(&decide::decide(policy, request, objects, settings, now).map_err(js)?)
}

/// Runs a scenario (YAML): `runs` is `kubevirt`, `evac` or `both` (empty or left out: both); returns
/// `{runs: [{label, report, timeline}], problems, html}` as JSON.
#[wasm_bindgen(js_name = runScenario)]
pub fn run_scenario_js(scenario: &str, runs: Option<String>) -> Result<String, wasm_bindgen::JsError> {
    let runs = scenario::Runs::parse(runs.as_deref().unwrap_or_default()).map_err(js)?;
    json(&scenario::run(scenario, runs).map_err(js)?)
}

/// The examples: `{requests: [{policy, requests: [{name, text}], context, settings}], scenarios:
/// [{name, text}]}`.
#[wasm_bindgen(js_name = examples)]
pub fn examples_js() -> Result<String, wasm_bindgen::JsError> {
    json(&examples::catalog())
}

/// The example request named `name`: `{policy, name, text, context, settings}`, or an error
/// listing the names there are.
#[wasm_bindgen(js_name = example)]
pub fn example_js(name: &str) -> Result<String, wasm_bindgen::JsError> {
    let (policy, example) = examples::request(name).map_err(js)?;
    json(&serde_json::json!({
        "policy": policy.policy, "name": example.name, "text": example.text,
        "context": policy.context, "settings": policy.settings,
    }))
}

/// The scenario named `name`: `{name, text}`, or an error listing the names there are.
#[wasm_bindgen(js_name = scenarioExample)]
pub fn scenario_example_js(name: &str) -> Result<String, wasm_bindgen::JsError> {
    json(examples::scenario(name).map_err(js)?)
}
