//! What a release is made of: one license and one version, said the same way everywhere.
//!
//! The license is Apache-2.0: the `LICENSE` file, every crate's `license` (inherited from the
//! workspace), every module's `io.kubewarden.policy.license`. The version is the workspace's
//! (`[workspace.package] version`): the binary's, every module's `io.kubewarden.policy.version`,
//! the image tag deploy/ installs, the tag `make image` builds, the module tags of the
//! Kubewarden manifests (deploy/kubewarden), and the newest release of `CHANGELOG.md`.

use std::path::{Path, PathBuf};
use std::process::Command;

use evac_e2e::{evac_bin, repo_root};
use evac_runtime::kubewarden::metadata;

/// The value of `key` in the `[section]` of a Cargo.toml: a minimal reading that is enough for
/// the few keys checked here (`key = "value"` or `key.workspace = true` on one line).
fn toml_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            current = line.trim_matches(['[', ']']).to_owned();
            continue;
        }
        if current != section {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            if k.trim() == key {
                return Some(v.trim().trim_matches('"').to_owned());
            }
        }
    }
    None
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Every Cargo.toml of the repository but the root's, found by walking it (build outputs and
/// VCS data left out), so that a crate added later is checked too.
fn crate_manifests() -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().unwrap().is_dir() {
                if !name.starts_with('.') && !["target", "dist", "node_modules"].contains(&name.as_str()) {
                    walk(&path, found);
                }
            } else if name == "Cargo.toml" && dir != repo_root() {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(&repo_root(), &mut found);
    found.sort();
    found
}

/// The workspace's version, the one version of a release.
fn workspace_version() -> String {
    let text = read(&repo_root().join("Cargo.toml"));
    toml_value(&text, "workspace.package", "version").expect("[workspace.package] version")
}

#[test]
fn every_crate_is_licensed_apache_2_0() {
    let root = read(&repo_root().join("Cargo.toml"));
    assert_eq!(toml_value(&root, "workspace.package", "license").as_deref(), Some("Apache-2.0"));

    let manifests = crate_manifests();
    // The workspace's members, the policies and the fuzz targets at least.
    assert!(manifests.len() >= 15, "{manifests:?}");
    for manifest in manifests {
        let text = read(&manifest);
        let license = if manifest.starts_with(repo_root().join("fuzz")) {
            // The fuzz targets are a workspace of their own: they cannot inherit.
            toml_value(&text, "package", "license")
        } else {
            toml_value(&text, "package", "license.workspace").map(|v| format!("workspace {v}"))
        };
        let expected =
            if manifest.starts_with(repo_root().join("fuzz")) { "Apache-2.0" } else { "workspace true" };
        assert_eq!(license.as_deref(), Some(expected), "{}: license", manifest.display());
    }

    let license = read(&repo_root().join("LICENSE"));
    assert!(license.trim_start().starts_with("Apache License"), "LICENSE is not the Apache License");
    assert!(license.contains("Version 2.0, January 2004"));
    assert!(license.contains("END OF TERMS AND CONDITIONS"), "LICENSE is not the whole text");

    for policy in policy_names() {
        let metadata = read(&repo_root().join("policies").join(&policy).join("metadata.yml"));
        let metadata: serde_yaml::Value = serde_yaml::from_str(&metadata).unwrap();
        assert_eq!(
            metadata["annotations"]["io.kubewarden.policy.license"].as_str(),
            Some("Apache-2.0"),
            "{policy}"
        );
    }
}

/// The policies: the directories of policies/ with a metadata.yml.
fn policy_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo_root().join("policies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("metadata.yml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["disruption-cause", "evacuation", "launcher-hold", "pod-eviction"]);
    names
}

/// The image deploy/ runs, without its tag.
const IMAGE: &str = "ghcr.io/evac-project/evac";

/// Every place that says which release this is says the workspace's version: the binary, each
/// policy's metadata.yml and built module, the image tag deploy/ installs (and every workload
/// of it runs), and the tag `make image` builds. Tags are `v` + the version, as Kubewarden's
/// policies and most images are tagged.
#[test]
fn one_version_everywhere() {
    let version = workspace_version();
    assert!(!version.is_empty() && version.split('.').count() == 3, "{version}");
    let tag = format!("v{version}");

    let output = Command::new(evac_bin()).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), format!("evac {version}"), "evac --version");

    for policy in policy_names() {
        let path = repo_root().join("policies").join(&policy).join("metadata.yml");
        let yml: serde_yaml::Value = serde_yaml::from_str(&read(&path)).unwrap();
        let annotation = &yml["annotations"]["io.kubewarden.policy.version"];
        assert_eq!(annotation.as_str(), Some(version.as_str()), "{}", path.display());
        // The built module embeds it (make build): a stale one would be published with another.
        let module = repo_root().join("dist/policies").join(format!("{policy}.wasm"));
        let bytes =
            std::fs::read(&module).unwrap_or_else(|e| panic!("{}: {e} (run `make build`)", module.display()));
        let embedded = metadata::read(&bytes).unwrap().expect("embedded metadata");
        assert_eq!(
            embedded.annotations.unwrap_or_default().get("io.kubewarden.policy.version"),
            Some(&version),
            "{} embeds another version: run `make build`",
            module.display()
        );
    }

    // deploy/kustomization.yaml sets the tag, and every container of the rendered base runs it.
    let kustomization: serde_yaml::Value =
        serde_yaml::from_str(&read(&repo_root().join("deploy/kustomization.yaml"))).unwrap();
    let images = kustomization["images"].as_sequence().expect("deploy/kustomization.yaml sets images:");
    assert_eq!(images.len(), 1, "{images:?}");
    assert_eq!(images[0]["name"].as_str(), Some(IMAGE));
    assert_eq!(images[0]["newName"].as_str(), Some(IMAGE));
    assert_eq!(images[0]["newTag"].as_str(), Some(tag.as_str()), "deploy/kustomization.yaml newTag");
    let rendered = Command::new("kubectl").arg("kustomize").arg(repo_root().join("deploy")).output().unwrap();
    assert!(rendered.status.success(), "{}", String::from_utf8_lossy(&rendered.stderr));
    let images: Vec<String> = String::from_utf8(rendered.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.trim().strip_prefix("image: "))
        .map(str::to_owned)
        .collect();
    assert_eq!(images.len(), 3, "the server, the controller and the hold: {images:?}");
    for image in images {
        assert_eq!(image, format!("{IMAGE}:{tag}"));
    }

    // The manifests name the image without a tag (kustomize would set it anyway: a tag written
    // in one of them would only mislead its reader).
    for entry in std::fs::read_dir(repo_root().join("deploy")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            for line in read(&path).lines().filter_map(|l| l.trim().strip_prefix("image: ")) {
                assert_eq!(line, IMAGE, "{}: the image by name only", path.display());
            }
        }
    }

    // The Kubewarden policies name the release's modules.
    let modules: Vec<String> = read(&repo_root().join("deploy/kubewarden/policies.yaml"))
        .lines()
        .filter_map(|l| l.trim().strip_prefix("module: "))
        .map(str::to_owned)
        .collect();
    assert_eq!(modules.len(), 4, "{modules:?}");
    for module in modules {
        assert!(module.ends_with(&format!(":{tag}")), "deploy/kubewarden: {module} is not {tag}");
    }

    // The newest release of the changelog is this one, with its link.
    let changelog = read(&repo_root().join("CHANGELOG.md"));
    let newest = changelog
        .lines()
        .filter_map(|l| l.strip_prefix("## ["))
        .find(|l| !l.starts_with("Unreleased"))
        .expect("CHANGELOG.md has a release");
    assert!(newest.starts_with(&format!("{version}] - ")), "CHANGELOG.md's newest release is {newest}");
    assert!(changelog.contains(&format!("\n[{version}]: ")), "CHANGELOG.md has no link for {version}");

    // `make image` tags with it (make -n: the command, without docker).
    let make = Command::new("make")
        .args(["-n", "image"])
        .current_dir(repo_root())
        .env_remove("IMAGE")
        .env_remove("IMAGE_REPO")
        .env_remove("VERSION")
        .env_remove("MAKEFLAGS")
        .output()
        .expect("make");
    assert!(make.status.success(), "{}", String::from_utf8_lossy(&make.stderr));
    let commands = String::from_utf8(make.stdout).unwrap();
    assert!(commands.contains(&format!(" -t {IMAGE}:{tag} ")), "make image tags otherwise: {commands}");
}
