use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

/// A field kept as raw JSON and decoded only when a decision asks for it: most decisions never
/// look at it, and capturing raw text costs no more than skipping it.
pub struct Lazy<'a, T> {
    raw: Option<&'a RawValue>,
    ty: PhantomData<T>,
}

impl<'a, T: Deserialize<'a> + Default> Lazy<'a, T> {
    /// The decoded value; the default when absent, `null` or malformed.
    pub fn get(&self) -> T {
        self.raw
            .and_then(|raw| serde_json::from_str::<Option<T>>(raw.get()).ok().flatten())
            .unwrap_or_default()
    }
}

impl<T> Lazy<'_, T> {
    /// Whether the field was absent or `null`.
    pub fn is_absent(&self) -> bool {
        self.raw.is_none_or(|raw| raw.get() == "null")
    }
}

impl<T> Default for Lazy<'_, T> {
    fn default() -> Self {
        Self { raw: None, ty: PhantomData }
    }
}

impl<T> Clone for Lazy<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Lazy<'_, T> {}

impl<'a, T: Deserialize<'a> + Default + fmt::Debug> fmt::Debug for Lazy<'a, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

impl<'a, T: Deserialize<'a> + Default + PartialEq> PartialEq for Lazy<'a, T> {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl<T> Serialize for Lazy<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.raw {
            Some(raw) => raw.serialize(serializer),
            None => serializer.serialize_none(),
        }
    }
}

impl<'de: 'a, 'a, T> Deserialize<'de> for Lazy<'a, T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Self { raw: Some(<&'a RawValue>::deserialize(deserializer)?), ty: PhantomData })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Holder<'a> {
        #[serde(borrow, default)]
        items: Lazy<'a, Vec<u32>>,
    }

    #[test]
    fn decodes_on_demand() {
        let holder: Holder<'_> = serde_json::from_str(r#"{"items": [1, 2]}"#).unwrap();
        assert_eq!(holder.items.get(), vec![1, 2]);
        let holder: Holder<'_> = serde_json::from_str(r#"{"items": null}"#).unwrap();
        assert!(holder.items.is_absent());
        assert!(holder.items.get().is_empty());
        let holder: Holder<'_> = serde_json::from_str(r#"{}"#).unwrap();
        assert!(holder.items.get().is_empty());
    }

    fn holder(text: &str) -> Holder<'_> {
        serde_json::from_str(text).unwrap()
    }

    /// (JSON, absent, decoded): a field is absent when missing or `null`; malformed reads as the
    /// default without being absent.
    #[test]
    fn absent_null_present_and_malformed() {
        let rows: &[(&str, bool, Vec<u32>)] = &[
            (r#"{}"#, true, vec![]),
            (r#"{"items": null}"#, true, vec![]),
            (r#"{"items": []}"#, false, vec![]),
            (r#"{"items": [3]}"#, false, vec![3]),
            (r#"{"items": "three"}"#, false, vec![]),
        ];
        for (text, absent, items) in rows {
            let holder = holder(text);
            assert_eq!(holder.items.is_absent(), *absent, "{text}");
            assert_eq!(&holder.items.get(), items, "{text}");
        }
    }

    /// Lazy fields compare and print as their decoded values, whatever the spacing of the raw text.
    #[test]
    fn compared_and_printed_as_decoded() {
        let (a, b, c) =
            (holder(r#"{"items": [1, 2]}"#), holder(r#"{"items":[1,2]}"#), holder(r#"{"items": [2, 1]}"#));
        assert!(a.items == b.items);
        assert!(a.items != c.items);
        assert!(holder(r#"{}"#).items == holder(r#"{"items": null}"#).items);
        assert_eq!(format!("{:?}", a.items), "[1, 2]");
        assert_eq!(format!("{:?}", holder("{}").items), "[]");
    }

    /// A copy of an object keeps its lazily read fields (`ObjectMeta` holds `ownerReferences` so).
    #[test]
    fn clones_keep_the_raw_value() {
        let text =
            r#"{"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "virt-launcher-vm-x"}]}"#;
        let meta: crate::model::ObjectMeta<'_> = serde_json::from_str(text).unwrap();
        let copy = meta.clone();
        assert_eq!(copy.owner_references.get().len(), 1);
        assert_eq!(copy.owner_references.get()[0].name, "virt-launcher-vm-x");
        assert!(!copy.owner_references.is_absent());
    }

    /// Serialized as read: the raw text, or `null` when the field was missing.
    #[test]
    fn serialized_as_read() {
        let holder = holder(r#"{"items": [1, 2]}"#);
        assert_eq!(serde_json::to_string(&holder.items).unwrap(), "[1, 2]");
        assert_eq!(serde_json::to_string(&Lazy::<Vec<u32>>::default()).unwrap(), "null");
    }
}
