//! The cache trusts only what it wrote: tests as another local user or a damaged disk would
//! meet it.

use std::os::unix::fs::{symlink, PermissionsExt};

use super::*;
use crate::wapc::{EngineOptions, PolicyEngine};

/// A module whose only export answers `value`.
fn module_answering(value: i32) -> Vec<u8> {
    wat::parse_str(format!(r#"(module (func (export "f") (result i32) (i32.const {value})))"#)).unwrap()
}

fn engine_with(dir: &Path) -> Result<PolicyEngine, crate::wapc::EngineError> {
    PolicyEngine::new(EngineOptions { cache_dir: Some(dir.to_owned()), ..EngineOptions::default() })
}

/// What `f` of a compiled module answers.
fn answer(engine: &PolicyEngine, module: &Module) -> i32 {
    let mut store = wasmtime::Store::new(engine.engine(), ());
    store.set_epoch_deadline(u64::MAX / 2);
    let instance = wasmtime::Instance::new(&mut store, module, &[]).unwrap();
    instance.get_typed_func::<(), i32>(&mut store, "f").unwrap().call(&mut store, ()).unwrap()
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    entries.sort();
    entries
}

#[test]
fn the_directory_is_created_private_and_entries_are_reused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("a/cache");
    let engine = engine_with(&dir).unwrap();
    assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    let module = compile(&engine, &module_answering(7)).unwrap();
    assert_eq!(answer(&engine, &module), 7);
    let [entry] = entries(&dir).try_into().unwrap();
    assert_eq!(fs::metadata(&entry).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(read_entry(&entry).unwrap().is_some(), "the entry's digest matches");
    // A second engine loads the entry; nothing else is left in the directory.
    let again = engine_with(&dir).unwrap();
    assert_eq!(answer(&again, &compile(&again, &module_answering(7)).unwrap()), 7);
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
}

#[test]
fn a_directory_others_may_write_or_a_link_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let open = root.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let error = format!("{:#}", engine_with(&open).err().expect("refused"));
    assert!(error.contains("others may write to it (mode 777)"), "{error}");
    assert!(error.contains(open.to_str().unwrap()), "{error}");

    let link = root.path().join("link");
    let private = root.path().join("private");
    fs::create_dir(&private).unwrap();
    symlink(&private, &link).unwrap();
    let error = format!("{:#}", engine_with(&link).err().expect("refused"));
    assert!(error.contains("it is a symbolic link"), "{error}");

    let file = root.path().join("file");
    fs::write(&file, b"").unwrap();
    let error = format!("{:#}", engine_with(&file).err().expect("refused"));
    assert!(error.contains("it is not a directory"), "{error}");
}

#[test]
fn a_damaged_entry_is_discarded_and_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(dir.path()).unwrap();
    compile(&engine, &module_answering(7)).unwrap();
    let [entry] = entries(dir.path()).try_into().unwrap();
    // Machine code damaged behind an intact header: loading it could crash the process.
    let mut bytes = fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    fs::write(&entry, &bytes).unwrap();
    assert!(format!("{:#}", read_entry(&entry).unwrap_err()).contains("do not match the digest"));
    let module = compile(&engine, &module_answering(7)).unwrap();
    assert_eq!(answer(&engine, &module), 7);
    assert!(read_entry(&entry).unwrap().is_some(), "written again, whole");
}

#[test]
fn a_planted_entry_is_never_loaded() {
    // Another module's machine code, serialized by the same engine, put under this module's
    // name without the cache's header: it must not answer for this module.
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(dir.path()).unwrap();
    compile(&engine, &module_answering(7)).unwrap();
    let [entry] = entries(dir.path()).try_into().unwrap();
    let planted = Module::new(engine.engine(), module_answering(666)).unwrap().serialize().unwrap();
    fs::write(&entry, planted).unwrap();
    assert_eq!(answer(&engine, &compile(&engine, &module_answering(7)).unwrap()), 7);

    // With the header, but writable by others.
    compile(&engine, &module_answering(7)).unwrap();
    fs::set_permissions(&entry, fs::Permissions::from_mode(0o666)).unwrap();
    assert!(format!("{:#}", read_entry(&entry).unwrap_err()).contains("others may write to it"));
    assert_eq!(answer(&engine, &compile(&engine, &module_answering(7)).unwrap()), 7);

    // Owned by another user (only root can arrange that).
    if effective_uid() == 0 {
        compile(&engine, &module_answering(7)).unwrap();
        std::os::unix::fs::chown(&entry, Some(65534), None).unwrap();
        assert!(format!("{:#}", read_entry(&entry).unwrap_err()).contains("belongs to uid 65534"));
        assert_eq!(answer(&engine, &compile(&engine, &module_answering(7)).unwrap()), 7);
    } else {
        eprintln!("skipped the other-owner case: it needs root to chown");
    }
}

#[test]
fn a_link_at_an_entry_is_replaced_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(dir.path()).unwrap();
    compile(&engine, &module_answering(7)).unwrap();
    let [entry] = entries(dir.path()).try_into().unwrap();
    fs::remove_file(&entry).unwrap();
    let victim = tempfile::NamedTempFile::new().unwrap();
    fs::write(victim.path(), b"precious").unwrap();
    symlink(victim.path(), &entry).unwrap();
    assert_eq!(answer(&engine, &compile(&engine, &module_answering(7)).unwrap()), 7);
    assert_eq!(fs::read(victim.path()).unwrap(), b"precious");
    assert!(fs::symlink_metadata(&entry).unwrap().file_type().is_file());
}

#[test]
fn old_entries_are_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(dir.path()).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for i in 0..MAX_ENTRIES + 5 {
        let path = dir.path().join(format!("old-{i:03}.cwasm"));
        fs::write(&path, b"x").unwrap();
        File::options().write(true).open(&path).unwrap().set_modified(old).unwrap();
    }
    compile(&engine, &module_answering(7)).unwrap();
    let left = entries(dir.path());
    assert_eq!(left.len(), MAX_ENTRIES);
    assert!(
        left.iter().any(|p| !p.file_name().unwrap().to_str().unwrap().starts_with("old-")),
        "the new one stays"
    );
}
