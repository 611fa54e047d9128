//! Reading `evac simulate --json` reports: the accessors the scenario tests share.

use serde_json::Value;

/// A count, 0 when absent.
pub fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// `vms.shutDown`.
pub fn shut_down(report: &Value) -> u64 {
    num(&report["vms"]["shutDown"])
}

/// `disruptedVms`.
pub fn rows(report: &Value) -> Vec<Value> {
    report["disruptedVms"].as_array().cloned().unwrap_or_default()
}

/// The VM's row in `disruptedVms`, by `namespace/name` or by a name in `default`.
pub fn row(report: &Value, vm: &str) -> Option<Value> {
    let full = format!("default/{vm}");
    rows(report).into_iter().find(|r| r["vm"] == full.as_str() || r["vm"] == vm)
}

/// The VM's outcome; a VM the report does not list was not disrupted: untouched.
pub fn outcome(report: &Value, vm: &str) -> String {
    row(report, vm)
        .map(|r| r["outcome"].as_str().unwrap_or("?").to_owned())
        .unwrap_or_else(|| "untouched".into())
}

/// The VM's row as text, for messages.
pub fn describe(report: &Value, vm: &str) -> String {
    row(report, vm).map(|r| r.to_string()).unwrap_or_else(|| "(not in disruptedVms)".into())
}

/// A time field of the VM's row (seconds), if it is a number.
pub fn vm_time(report: &Value, vm: &str, field: &str) -> Option<f64> {
    row(report, vm).and_then(|r| r[field].as_f64())
}
