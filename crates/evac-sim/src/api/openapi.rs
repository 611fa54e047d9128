//! The OpenAPI v3 documents kubectl reads before it creates or applies an object
//! (`k8s.io/cli-runtime/pkg/resource/query_param_verifier_v3.go`, `supportsQueryParamV3`): the
//! index `/openapi/v3` of group versions, and for each a document with a PATCH operation per kind
//! that takes the `fieldValidation` query parameter. kubectl then leaves validation to the server
//! instead of downloading schemas; the simulated server accepts the parameter and does not check
//! fields (see `docs/simulator.md`).

use serde_json::{json, Map, Value};

use super::resources::{Resource, RESOURCES};

/// The path of a group version under `/openapi/v3`: `api/v1` or `apis/<group>/<version>`.
fn path_of(resource: &Resource) -> String {
    if resource.group.is_empty() {
        format!("api/{}", resource.version)
    } else {
        format!("apis/{}/{}", resource.group, resource.version)
    }
}

/// `GET /openapi/v3`: each group version and where its document is.
pub fn index() -> Value {
    let mut paths = Map::new();
    for resource in RESOURCES {
        let path = path_of(resource);
        // The hash only has to change when the document does: it is fixed for a build.
        let url = format!("/openapi/v3/{path}?hash={}", env!("CARGO_PKG_VERSION"));
        paths.insert(path, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// `GET /openapi/v3/<api/v1 | apis/group/version>`: one PATCH operation per kind, with its
/// `x-kubernetes-group-version-kind` and the `fieldValidation` parameter.
pub fn group_version(path: &str) -> Option<Value> {
    let served: Vec<&Resource> = RESOURCES.iter().filter(|r| path_of(r) == path).collect();
    if served.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for resource in served {
        let scope = if resource.namespaced { "namespaces/{namespace}/" } else { "" };
        let item = format!("/{path}/{scope}{}/{{name}}", resource.plural);
        let gvk = json!({"group": resource.group, "version": resource.version, "kind": resource.kind});
        let patch = json!({
            "operationId": format!("patch{}", resource.kind),
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [
                {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
            ],
            "responses": {"200": {"description": "OK"}},
        });
        paths.insert(item, json!({"patch": patch}));
    }
    Some(json!({"openapi": "3.0.0", "info": {"title": TITLE, "version": VERSION}, "paths": paths}))
}

/// The title and version of the documents.
const TITLE: &str = "Kubernetes";
const VERSION: &str = "v1.33.0-evac-sim";

/// `GET /openapi/v2`: a Swagger 2.0 document with no definitions, as JSON or, as client-go asks
/// for it (`discovery.OpenAPISchema`), as the protobuf of gnostic's `openapi_v2.Document`.
/// kubectl's client-side validation (`kubectl apply` of a `v1 List`, whose kind no v3 document
/// names) looks each item's kind up in it, finds no schema, and skips the item
/// (`openapivalidation.SchemaValidation.validateResource`): the server validates instead.
pub fn v2(protobuf: bool) -> (&'static str, Vec<u8>) {
    if !protobuf {
        let document = json!({"swagger": "2.0", "info": {"title": TITLE, "version": VERSION}, "paths": {}});
        return ("application/json", document.to_string().into_bytes());
    }
    // Document { swagger = 1; info = 2 }, Info { title = 1; version = 2 }: length-delimited fields.
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2];
        let mut len = bytes.len();
        while len >= 0x80 {
            out.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(bytes);
        out
    }
    let info = [field(1, TITLE.as_bytes()), field(2, VERSION.as_bytes())].concat();
    (
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
        [field(1, b"2.0"), field(2, &info)].concat(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_patch_with_field_validation() {
        let index = index();
        let url = index["paths"]["api/v1"]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with("/openapi/v3/api/v1?hash="), "{url}");
        let core = group_version("api/v1").unwrap();
        let pods = &core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(pods["x-kubernetes-group-version-kind"]["kind"], "Pod");
        assert!(pods["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"));
        let kubevirt = group_version("apis/kubevirt.io/v1").unwrap();
        assert!(kubevirt["paths"]
            ["/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances/{name}"]
            .is_object());
        assert!(group_version("apis/nothing/v1").is_none());
    }
}
