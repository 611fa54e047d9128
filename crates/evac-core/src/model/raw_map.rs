use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use super::Str;

/// A JSON object of strings (labels, annotations) kept as its raw text and read on demand.
///
/// Decisions look up one or two keys of maps that may hold dozens of entries; finding a key in the
/// raw text costs less than building the whole map, and nothing is allocated unless a value has
/// escapes.
#[derive(Clone, Copy, Default)]
pub struct RawMap<'a>(Option<&'a RawValue>);

impl<'a> RawMap<'a> {
    /// The value of `key`, if present and a string.
    pub fn get(&self, key: &str) -> Option<Str<'a>> {
        let raw = self.0?;
        let mut de = serde_json::Deserializer::from_str(raw.get());
        Find { key }.deserialize(&mut de).ok().flatten()
    }

    /// Every string entry, in key order.
    pub fn to_map(&self) -> BTreeMap<Str<'a>, Str<'a>> {
        self.0
            .and_then(|raw| {
                serde_json::from_str::<Option<BTreeMap<Str<'a>, Str<'a>>>>(raw.get()).ok().flatten()
            })
            .unwrap_or_default()
    }

    /// Whether the map has no string entries; an absent or `null` map has none.
    pub fn is_empty(&self) -> bool {
        self.to_map().is_empty()
    }
}

impl fmt::Debug for RawMap<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.to_map()).finish()
    }
}

impl PartialEq for RawMap<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.to_map() == other.to_map()
    }
}

impl Serialize for RawMap<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(serializer)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawMap<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'a RawValue>::deserialize(deserializer)?;
        let text = raw.get().trim_start();
        if text.starts_with('{') {
            Ok(RawMap(Some(raw)))
        } else if text == "null" {
            Ok(RawMap(None))
        } else {
            Err(de::Error::invalid_type(de::Unexpected::Other("a non-object"), &"a map of strings"))
        }
    }
}

/// Finds one key's string value in a JSON object, skipping everything else.
struct Find<'k> {
    key: &'k str,
}

impl<'de> DeserializeSeed<'de> for Find<'_> {
    type Value = Option<Str<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Find<'_> {
    type Value = Option<Str<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            if found.is_none() && key.as_str() == self.key {
                found = map.next_value::<Option<Str<'de>>>()?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Meta<'a> {
        #[serde(borrow, default)]
        labels: RawMap<'a>,
    }

    #[test]
    fn finds_keys_without_building_the_map() {
        let text =
            r#"{"labels": {"app": "web", "kubevirt.io": "virt-launcher", "note": "a \"quoted\" value"}}"#;
        let meta: Meta<'_> = serde_json::from_str(text).unwrap();
        assert_eq!(meta.labels.get("kubevirt.io").as_deref(), Some("virt-launcher"));
        assert_eq!(meta.labels.get("note").as_deref(), Some(r#"a "quoted" value"#));
        assert_eq!(meta.labels.get("missing"), None);
        assert_eq!(meta.labels.to_map().len(), 3);
    }

    #[test]
    fn null_and_absent_maps_are_empty() {
        let meta: Meta<'_> = serde_json::from_str(r#"{"labels": null}"#).unwrap();
        assert!(meta.labels.is_empty());
        let meta: Meta<'_> = serde_json::from_str(r#"{}"#).unwrap();
        assert_eq!(meta.labels.get("x"), None);
        assert!(serde_json::from_str::<Meta<'_>>(r#"{"labels": 3}"#).is_err());
    }

    fn labels(text: &str) -> RawMap<'_> {
        serde_json::from_str::<Meta<'_>>(text).unwrap().labels
    }

    /// Maps compare, print and serialize as their entries, whatever the order and spacing of the
    /// raw text.
    #[test]
    fn behave_as_their_entries() {
        let a = labels(r#"{"labels": {"app": "web", "tier": "db"}}"#);
        let b = labels(r#"{"labels":{"tier":"db","app":"web"}}"#);
        let c = labels(r#"{"labels": {"app": "web"}}"#);
        assert!(a == b);
        assert!(a != c);
        assert!(labels(r#"{"labels": null}"#) == labels(r#"{"labels": {}}"#));
        assert_eq!(format!("{a:?}"), r#"{"app": "web", "tier": "db"}"#);
        assert_eq!(serde_json::to_string(&b).unwrap(), r#"{"app":"web","tier":"db"}"#);
        assert_eq!(serde_json::to_string(&RawMap::default()).unwrap(), "{}");
    }

    #[test]
    fn empty_maps() {
        // (labels, empty)
        let rows = [
            (r#"{}"#, true),
            (r#"{"labels": null}"#, true),
            (r#"{"labels": {}}"#, true),
            (r#"{"labels": {"app": "web"}}"#, false),
        ];
        for (text, empty) in rows {
            assert_eq!(labels(text).is_empty(), empty, "{text}");
        }
    }

    /// The first occurrence of a key wins, and a value that is not a string is not found.
    #[test]
    fn duplicate_keys_and_other_values() {
        let map = labels(r#"{"labels": {"app": "web", "count": 3, "app": "db", "gone": null}}"#);
        assert_eq!(map.get("app").as_deref(), Some("web"));
        assert_eq!(map.get("count"), None);
        assert_eq!(map.get("gone"), None);
    }
}
