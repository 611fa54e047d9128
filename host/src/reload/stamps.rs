//! The files a process's configuration is made of (`policies.yml`, the modules it names, the TLS
//! files) and when they change: `evac serve`, `evac control` and `evac hold` reload only then.
//!
//! A directory watch sees every file of the directory: a log written beside `policies.yml` would
//! otherwise reload, and with a refused `policies.yml` log its refusal, which is the next change.
//! A change is therefore decided from the files themselves: each one's identity and modification
//! as `stat` reports them through symbolic links (a Kubernetes ConfigMap volume replaces its files
//! by renaming the `..data` link they point through: the target's inode changes).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use evac_evaluator::{PoliciesFile, PolicySet, Registry};

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    len: u64,
    modified: (i64, i64),
    /// The inode's change time: an in-place rewrite that keeps the modification time (`cp -p`,
    /// `rsync -t`) still changes it.
    changed: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Self {
            device: meta.dev(),
            inode: meta.ino(),
            len: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        })
    }
}

/// The stamps of a configuration's files, in a fixed order; a file that cannot be read is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamps(Vec<(PathBuf, Option<Stamp>)>);

impl Stamps {
    /// `policies`, the modules it names when it parses, and `extra` files.
    pub fn read(policies: &Path, extra: &[&Path]) -> Self {
        let mut files = vec![policies.to_path_buf()];
        if let Ok(file) = PoliciesFile::load(policies) {
            files.extend(Registry::module_paths(&file));
        }
        files.extend(extra.iter().map(|p| p.to_path_buf()));
        Self(
            files
                .into_iter()
                .map(|path| (Stamp::of(&path), path))
                .map(|(stamp, path)| (path, stamp))
                .collect(),
        )
    }
}

/// Reloads a registry from `policies.yml` when its files change: a refused content is logged and
/// counted once, and again only when the files change.
pub struct PolicyReload {
    policies: PathBuf,
    /// The files as they were at the last reload (or at start).
    seen: Stamps,
}

/// What [`PolicyReload::reload`] did.
pub enum Reloaded {
    /// The files are as they were: nothing read.
    Unchanged,
    /// The file was read: the registry took what loads (its refusals are logged and counted).
    Loaded(PoliciesFile),
    /// The file does not parse: the served policies stay (logged and counted).
    Refused,
}

impl PolicyReload {
    /// Starts from the files as they are now: call it before loading them, so that a change
    /// made while they load is reloaded.
    pub fn new(policies: &Path, extra: &[&Path]) -> Self {
        Self::from_stamps(policies, Stamps::read(policies, extra))
    }

    /// Starts from stamps read earlier (before the files were loaded).
    pub fn from_stamps(policies: &Path, seen: Stamps) -> Self {
        Self { policies: policies.to_path_buf(), seen }
    }

    /// Reloads if the files changed since the last call (or `force`: SIGHUP), checking the new
    /// set with `check`. `extra` are files outside the policies (TLS) whose change also counts.
    pub fn reload<E: std::fmt::Display>(
        &mut self,
        registry: &Registry,
        check: impl Fn(&PolicySet) -> Result<(), E>,
        extra: &[&Path],
        force: bool,
    ) -> Reloaded {
        let now = Stamps::read(&self.policies, extra);
        if now == self.seen && !force {
            return Reloaded::Unchanged;
        }
        self.seen = now;
        match PoliciesFile::load(&self.policies) {
            Ok(file) => {
                registry.reload_checked(&file, check);
                Reloaded::Loaded(file)
            }
            Err(e) => {
                registry.refuse_file(&e.to_string());
                Reloaded::Refused
            }
        }
    }

    /// Whether the files differ from those of the last reload, without reloading.
    pub fn changed(&self, extra: &[&Path]) -> bool {
        Stamps::read(&self.policies, extra) != self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_beside_the_configuration_is_no_change() {
        let dir = tempfile::tempdir().unwrap();
        let policies = dir.path().join("policies.yml");
        std::fs::write(&policies, "{}\n").unwrap();
        let reload = PolicyReload::new(&policies, &[]);
        std::fs::write(dir.path().join("evac.log"), "a line\n").unwrap();
        assert!(!reload.changed(&[]));
        // Rewritten in place with other contents (or replaced through a link): a change.
        std::fs::write(&policies, "{ }\n").unwrap();
        assert!(reload.changed(&[]));
    }

    #[test]
    fn a_replaced_link_target_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        // The same contents and size, as a ConfigMap update that only renames `..data`.
        std::fs::write(a.join("policies.yml"), "{}\n").unwrap();
        std::fs::write(b.join("policies.yml"), "{}\n").unwrap();
        let data = dir.path().join("..data");
        std::os::unix::fs::symlink(&a, &data).unwrap();
        let policies = dir.path().join("policies.yml");
        std::os::unix::fs::symlink(data.join("policies.yml"), &policies).unwrap();
        let reload = PolicyReload::new(&policies, &[]);
        let tmp = dir.path().join("..data_tmp");
        std::os::unix::fs::symlink(&b, &tmp).unwrap();
        std::fs::rename(&tmp, &data).unwrap();
        assert!(reload.changed(&[]));
    }
}
