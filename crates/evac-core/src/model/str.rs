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
}
