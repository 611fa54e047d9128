use std::borrow::{Borrow, Cow};
use std::fmt;
use std::ops::Deref;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde::{Serialize, Serializer};

/// A string that borrows from the JSON it was read from when it can (no escapes), and owns a copy
/// when it must; `null` reads as the empty string. Decisions read many small strings from cluster
/// objects; borrowing them instead of allocating each is most of the difference between a cheap and
/// an expensive decode.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Str<'a>(pub Cow<'a, str>);

impl<'a> Str<'a> {
    /// The text, borrowed.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// An owned copy, which outlives the JSON it was read from.
    pub fn into_owned(self) -> Str<'static> {
        Str(Cow::Owned(self.0.into_owned()))
    }
}

impl Deref for Str<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Str<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'a> From<&'a str> for Str<'a> {
    fn from(value: &'a str) -> Self {
        Str(Cow::Borrowed(value))
    }
}

impl From<String> for Str<'_> {
    fn from(value: String) -> Self {
        Str(Cow::Owned(value))
    }
}

impl PartialEq<str> for Str<'_> {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Str<'_> {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl Serialize for Str<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;

        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Str<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }

            /// Kubernetes may send `null` for an unset string: it reads as empty.
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Str::default())
            }
        }

        deserializer.deserialize_any(StrVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrows_plain_strings_and_owns_escaped_ones() {
        let plain: Str<'_> = serde_json::from_str(r#""node01""#).unwrap();
        assert!(matches!(plain.0, Cow::Borrowed("node01")));
        let escaped: Str<'_> = serde_json::from_str(r#""{\"a\":1}""#).unwrap();
        assert!(matches!(escaped.0, Cow::Owned(_)));
        assert_eq!(escaped, r#"{"a":1}"#);
        assert!(serde_json::from_str::<Str<'_>>("3").is_err());
        assert_eq!(serde_json::from_str::<Str<'_>>("null").unwrap(), "");
    }

    /// A `Str` reads, compares, prints and serializes as the text it holds.
    #[test]
    fn behaves_as_its_text() {
        let borrowed = Str::from("node01");
        let owned = Str::from(String::from("node01"));
        for s in [&borrowed, &owned] {
            assert_eq!(s.as_str(), "node01");
            assert_eq!(s.len(), 6, "deref to str");
            assert!(*s == *"node01" && *s == "node01");
            assert!(*s != *"node02" && *s != "node02");
            assert_eq!(s.to_string(), "node01");
            // Debug quotes it as a str does: messages show names as "node01".
            assert_eq!(format!("{s:?}"), r#""node01""#);
            assert_eq!(serde_json::to_string(s).unwrap(), r#""node01""#);
        }
        assert_eq!(borrowed, owned);
        let escaped = Str::from("a \"quoted\" name");
        assert_eq!(format!("{escaped:?}"), r#""a \"quoted\" name""#);
        assert_eq!(serde_json::to_string(&escaped).unwrap(), r#""a \"quoted\" name""#);
    }

    #[test]
    fn into_owned_keeps_the_text() {
        let text = String::from(r#""vm-cirros""#);
        let owned: Str<'static> = serde_json::from_str::<Str<'_>>(&text).unwrap().into_owned();
        drop(text);
        assert!(matches!(owned.0, Cow::Owned(_)));
        assert_eq!(owned, "vm-cirros");
    }

    /// Maps keyed by `Str` are looked up with a plain `&str`.
    #[test]
    fn map_keys_borrow_as_str() {
        let labels = std::collections::BTreeMap::from([(Str::from("kubevirt.io"), 1), (Str::from("app"), 2)]);
        assert_eq!(labels.get("kubevirt.io"), Some(&1));
        assert_eq!(labels.get("app"), Some(&2));
        assert_eq!(labels.get("kubevirt"), None);
    }

    /// From a `serde_json::Value` (an owned string) as from text; what is not a string is an
    /// error that says a string was expected.
    #[test]
    fn reads_owned_strings_and_refuses_other_values() {
        let from_value = Str::deserialize(serde_json::json!("node01")).unwrap();
        assert_eq!(from_value, "node01");
        assert_eq!(Str::deserialize(serde_json::Value::Null).unwrap(), "");
        let error = serde_json::from_str::<Str<'_>>("3").unwrap_err().to_string();
        assert_eq!(error, "invalid type: integer `3`, expected a string at line 1 column 1");
        let error = Str::deserialize(serde_json::json!(true)).unwrap_err().to_string();
        assert_eq!(error, "invalid type: boolean `true`, expected a string");
    }
}
