//! Load-time analysis of a module: can one instance be safely reused between evaluations?
//!
//! Reuse is safe when every piece of instance state can be put back to its post-init value:
//! the one linear memory (restored page by page), the mutable globals (which this rewrites the
//! module to export, so the host can read and restore them), and nothing else. Modules that can
//! change other state (tables, dropped segments, several memories, imported mutable globals) get
//! a fresh instance for every evaluation instead.

use wasm_encoder::{ExportKind, ExportSection, RawSection};
use wasmparser::BinaryReaderError;
use wasmparser::{ExternalKind, Operator, Parser, Payload, TypeRef};

/// Export-name prefix of the mutable globals the host snapshots.
pub(crate) const GLOBAL_EXPORT_PREFIX: &str = "__evac_reset_global_";

pub(crate) struct Prepared {
    /// The module to compile: the original, plus exports of its mutable globals when reusable.
    pub(crate) bytes: Vec<u8>,
    /// `Ok(global export names)` when instances may be reused; `Err(why not)` otherwise.
    pub(crate) reuse: Result<Vec<String>, String>,
    /// The byte size the module's memory starts with.
    pub(crate) initial_memory: u64,
}

/// Why a module cannot be prepared: it does not parse.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrepareError {
    /// A section does not parse.
    #[error("not a valid WebAssembly module: {0}")]
    Section(BinaryReaderError),
    /// Something inside a section does not parse.
    #[error(transparent)]
    Content(#[from] BinaryReaderError),
}

pub(crate) fn prepare(bytes: &[u8]) -> Result<Prepared, PrepareError> {
    let mut imported_globals = 0u32;
    let mut memories = 0u32;
    let mut mutable_globals = Vec::new();
    let mut initial_memory = 0u64;
    let mut blocker: Option<String> = None;
    let mut block = |why: String| {
        blocker.get_or_insert(why);
    };

    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(PrepareError::Section)? {
            Payload::ImportSection(imports) => {
                for import in imports {
                    let import = import?;
                    match import.ty {
                        TypeRef::Global(g) => {
                            if g.mutable {
                                block(format!(
                                    "it imports the mutable global {}::{}",
                                    import.module, import.name
                                ));
                            }
                            imported_globals += 1;
                        }
                        TypeRef::Memory(memory) => {
                            memories += 1;
                            initial_memory = initial_memory.max(memory_bytes(&memory));
                        }
                        _ => {}
                    }
                }
            }
            Payload::MemorySection(section) => {
                for memory in section {
                    memories += 1;
                    initial_memory = initial_memory.max(memory_bytes(&memory?));
                }
            }
            Payload::GlobalSection(section) => {
                for (i, global) in section.into_iter().enumerate() {
                    if global?.ty.mutable {
                        mutable_globals.push(imported_globals + i as u32);
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                let mut ops = body.get_operators_reader()?;
                while !ops.eof() {
                    let changes_state = match ops.read()? {
                        Operator::TableSet { .. } => Some("table.set"),
                        Operator::TableGrow { .. } => Some("table.grow"),
                        Operator::TableFill { .. } => Some("table.fill"),
                        Operator::TableCopy { .. } => Some("table.copy"),
                        Operator::TableInit { .. } => Some("table.init"),
                        Operator::ElemDrop { .. } => Some("elem.drop"),
                        Operator::DataDrop { .. } => Some("data.drop"),
                        _ => None,
                    };
                    if let Some(op) = changes_state {
                        block(format!("it uses {op}"));
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    if memories != 1 {
        block(format!("it has {memories} memories"));
    }
    if let Some(why) = blocker {
        return Ok(Prepared { bytes: bytes.to_vec(), reuse: Err(why), initial_memory });
    }
    let names: Vec<String> = mutable_globals.iter().map(|i| format!("{GLOBAL_EXPORT_PREFIX}{i}")).collect();
    let bytes =
        if mutable_globals.is_empty() { bytes.to_vec() } else { export_globals(bytes, &mutable_globals)? };
    Ok(Prepared { bytes, reuse: Ok(names), initial_memory })
}

fn memory_bytes(memory: &wasmparser::MemoryType) -> u64 {
    let page = memory.page_size_log2.map_or(65536, |log2| 1u64 << log2);
    memory.initial.saturating_mul(page)
}

/// Re-encodes the export section with the given globals exported.
fn export_globals(bytes: &[u8], globals: &[u32]) -> Result<Vec<u8>, BinaryReaderError> {
    let mut out = wasm_encoder::Module::new();
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload?;
        if let Payload::ExportSection(exports) = &payload {
            let mut section = ExportSection::new();
            for export in exports.clone() {
                let export = export?;
                let kind = match export.kind {
                    ExternalKind::Func => ExportKind::Func,
                    ExternalKind::Table => ExportKind::Table,
                    ExternalKind::Memory => ExportKind::Memory,
                    ExternalKind::Global => ExportKind::Global,
                    ExternalKind::Tag => ExportKind::Tag,
                };
                section.export(export.name, kind, export.index);
            }
            for index in globals {
                section.export(&format!("{GLOBAL_EXPORT_PREFIX}{index}"), ExportKind::Global, *index);
            }
            out.section(&section);
            continue;
        }
        if let Some((id, range)) = payload.as_section() {
            out.section(&RawSection { id, data: &bytes[range] });
        }
    }
    Ok(out.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_mutable_globals_of_reusable_modules() {
        let wasm = wat::parse_str(
            r#"(module (memory (export "memory") 1)
                 (global $sp (mut i32) (i32.const 1024)) (global i32 (i32.const 7))
                 (func (export "f")))"#,
        )
        .unwrap();
        let prepared = prepare(&wasm).unwrap();
        assert_eq!(prepared.reuse, Ok(vec![format!("{GLOBAL_EXPORT_PREFIX}0")]));
        wasmparser::validate(&prepared.bytes).unwrap();
    }

    #[test]
    fn refuses_reuse_when_state_could_escape_the_reset() {
        let cases = [
            (
                r#"(module (memory 1) (table 1 funcref) (func (table.set 0 (i32.const 0) (ref.null func))))"#,
                "table.set",
            ),
            (r#"(module (memory 1) (data "x") (func (data.drop 0)))"#, "data.drop"),
            (r#"(module (memory 1) (memory 1))"#, "2 memories"),
            (r#"(module (import "env" "g" (global (mut i32))) (memory 1))"#, "mutable global"),
        ];
        for (text, why) in cases {
            let prepared = prepare(&wat::parse_str(text).unwrap()).unwrap();
            let reason = prepared.reuse.unwrap_err();
            assert!(reason.contains(why), "{text}: {reason}");
        }
    }
}
