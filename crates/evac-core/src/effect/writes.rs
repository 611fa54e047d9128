//! What carrying out each effect writes to the cluster, as RBAC names it: what `deploy/` must
//! grant the host that carries effects out, and nothing more.

use core::fmt;
use core::str::FromStr;

use super::Effect;

/// One kind of API request, as an RBAC rule names it: a verb on a resource of an API group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    /// `create`, `patch`, ...
    pub verb: &'static str,
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The resource (plural).
    pub resource: &'static str,
}

impl Access {
    /// `verb` on `resource` of API group `group`.
    pub const fn new(verb: &'static str, group: &'static str, resource: &'static str) -> Self {
        Self { verb, group, resource }
    }
}

/// The event each decision carried out on a VMI's behalf is recorded with.
const EVENT: Access = Access::new("create", "", "events");
const PATCH_VMIS: Access = Access::new("patch", "kubevirt.io", "virtualmachineinstances");
const CREATE_MIGRATIONS: Access = Access::new("create", "kubevirt.io", "virtualmachineinstancemigrations");
const PATCH_MIGRATIONS: Access = Access::new("patch", "kubevirt.io", "virtualmachineinstancemigrations");
const DELETE_MIGRATIONS: Access = Access::new("delete", "kubevirt.io", "virtualmachineinstancemigrations");
const PATCH_PODS: Access = Access::new("patch", "", "pods");

/// The type of an [`Effect`], as its `type` tag names it (and a policy's metadata declares it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EffectType {
    /// [`Effect::MarkForEvacuation`].
    MarkForEvacuation,
    /// [`Effect::CreateMigration`].
    CreateMigration,
    /// [`Effect::RequestEvacuation`].
    RequestEvacuation,
    /// [`Effect::AnnotateMigration`].
    AnnotateMigration,
    /// [`Effect::CancelMigration`].
    CancelMigration,
    /// [`Effect::AnnotatePod`].
    AnnotatePod,
    /// [`Effect::ClearEvacuation`].
    ClearEvacuation,
    /// [`Effect::RecordEvent`].
    RecordEvent,
}

impl EffectType {
    /// Every effect type.
    pub const ALL: [EffectType; 8] = [
        Self::MarkForEvacuation,
        Self::CreateMigration,
        Self::RequestEvacuation,
        Self::AnnotateMigration,
        Self::CancelMigration,
        Self::AnnotatePod,
        Self::ClearEvacuation,
        Self::RecordEvent,
    ];

    /// The `type` tag (`MarkForEvacuation`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::MarkForEvacuation => "MarkForEvacuation",
            Self::CreateMigration => "CreateMigration",
            Self::RequestEvacuation => "RequestEvacuation",
            Self::AnnotateMigration => "AnnotateMigration",
            Self::CancelMigration => "CancelMigration",
            Self::AnnotatePod => "AnnotatePod",
            Self::ClearEvacuation => "ClearEvacuation",
            Self::RecordEvent => "RecordEvent",
        }
    }

    /// The writes carrying out an effect of this type makes (its reads go through the watch
    /// caches, which need `list` and `watch` of what they hold).
    pub const fn writes(self) -> &'static [Access] {
        match self {
            Self::MarkForEvacuation => &[PATCH_VMIS, EVENT],
            Self::CreateMigration => &[CREATE_MIGRATIONS, EVENT],
            Self::RequestEvacuation => &[PATCH_VMIS, EVENT],
            Self::AnnotateMigration => &[PATCH_MIGRATIONS],
            Self::CancelMigration => &[DELETE_MIGRATIONS, EVENT],
            Self::AnnotatePod => &[PATCH_PODS],
            Self::ClearEvacuation => &[PATCH_VMIS, EVENT],
            Self::RecordEvent => &[EVENT],
        }
    }
}

impl fmt::Display for EffectType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no effect's `type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEffectType(pub String);

impl fmt::Display for UnknownEffectType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no effect type {:?}", self.0)
    }
}

impl std::error::Error for UnknownEffectType {}

impl FromStr for EffectType {
    type Err = UnknownEffectType;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|t| t.as_str() == name).ok_or_else(|| UnknownEffectType(name.to_owned()))
    }
}

impl Effect {
    /// The effect's type.
    pub fn effect_type(&self) -> EffectType {
        match self {
            Effect::MarkForEvacuation { .. } => EffectType::MarkForEvacuation,
            Effect::CreateMigration { .. } => EffectType::CreateMigration,
            Effect::RequestEvacuation { .. } => EffectType::RequestEvacuation,
            Effect::AnnotateMigration { .. } => EffectType::AnnotateMigration,
            Effect::CancelMigration { .. } => EffectType::CancelMigration,
            Effect::AnnotatePod { .. } => EffectType::AnnotatePod,
            Effect::ClearEvacuation { .. } => EffectType::ClearEvacuation,
            Effect::RecordEvent { .. } => EffectType::RecordEvent,
        }
    }

    /// What carrying the effect out writes ([`EffectType::writes`]).
    pub fn writes(&self) -> &'static [Access] {
        self.effect_type().writes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_parse_back() {
        for effect_type in EffectType::ALL {
            assert_eq!(effect_type.as_str().parse::<EffectType>(), Ok(effect_type));
            assert!(!effect_type.writes().is_empty(), "{effect_type}");
        }
        assert_eq!("Mark".parse::<EffectType>().unwrap_err().to_string(), r#"no effect type "Mark""#);
    }
}
