//! The examples' READMEs (`examples/disruption-cause/`, `examples/evacuation/`): each documents
//! its requests' answers in a table, which the playground's tests and the end-to-end tests hold
//! the policies to, each through its own host.

use serde_json::Value;

/// The cells of the table's rows (`| request | answer | effects | why |`), header left out.
pub fn readme_rows(readme: &str) -> Vec<Vec<&str>> {
    readme
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| request "))
        .map(|line| line.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect()
}

/// A policy's answer (its response as JSON: `accepted`, `code`, `effects`) in the table's words:
/// `allowed` or `denied: <code>`, and the effects (`none`, or `<Type> <namespace>/<name>, ...`).
pub fn in_words(response: &Value) -> (String, String) {
    let answer = if response["accepted"] == true {
        "allowed".to_owned()
    } else {
        format!("denied: {}", response["code"].as_u64().unwrap_or(400))
    };
    let effects: Vec<String> = response["effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|effect| {
            let object = ["vmi", "pod", "migration"].iter().find_map(|key| effect.get(*key)).unwrap();
            format!(
                "{} {}/{}",
                effect["type"].as_str().unwrap(),
                object["namespace"].as_str().unwrap(),
                object["name"].as_str().unwrap()
            )
        })
        .collect();
    (answer, if effects.is_empty() { "none".to_owned() } else { effects.join(", ") })
}
