//! A job's payload (and output): JSON text as given, checked once for
//! what a store can hold and a reader can render.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::truncate_for_message;

/// The largest payload accepted by default (1 MiB of JSON text).
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// The deepest nesting of arrays and objects accepted in a payload. Deeper
/// JSON is valid but no database stores it (SQLite's JSON functions stop at
/// 1,000 levels, PostgreSQL at its stack depth), and no real payload needs it.
pub const MAX_PAYLOAD_DEPTH: usize = 128;

/// The largest output a job may record (JSON text, in bytes): what its
/// dependents read, not a place for bulk results.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// A job's payload: JSON text, validated and size-limited when created.
/// It serializes as the JSON value itself, not as a string.
#[derive(Clone, PartialEq, Eq)]
pub struct Payload(String);

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The stored text goes out as it is (serde_json writes a raw value
        // without parsing it again), so whatever was stored renders.
        match serde_json::from_str::<&serde_json::value::RawValue>(&self.0) {
            Ok(raw) => raw.serialize(s),
            Err(e) => Err(serde::ser::Error::custom(format!(
                "a stored payload is not JSON: {e}"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        Payload::from_json_text(raw.get().to_owned()).map_err(serde::de::Error::custom)
    }
}

impl Payload {
    /// Validates JSON text against the default size limit.
    pub fn from_json_text(text: impl Into<String>) -> Result<Self, Error> {
        Self::from_json_text_limited(text, MAX_PAYLOAD_BYTES)
    }

    /// Validates JSON text against `limit` bytes.
    pub fn from_json_text_limited(text: impl Into<String>, limit: usize) -> Result<Self, Error> {
        Self::checked("payload", text.into(), limit)
    }

    /// Validates a job's output: JSON text of at most
    /// [`MAX_OUTPUT_BYTES`].
    ///
    /// # Errors
    /// [`Error::Invalid`], saying what is wrong with the output.
    pub fn output(text: impl Into<String>) -> Result<Self, Error> {
        Self::checked("output", text.into(), MAX_OUTPUT_BYTES)
    }

    /// Serializes a value as a job's output ([`Payload::output`]).
    ///
    /// # Errors
    /// [`Error::Invalid`] if it cannot be serialized or is too large.
    pub fn output_from_value<T: Serialize + ?Sized>(value: &T) -> Result<Self, Error> {
        let text = serde_json::to_string(value)
            .map_err(|e| Error::invalid(format!("the output cannot be serialized: {e}")))?;
        Self::output(text)
    }

    /// JSON text checked as `what` (a payload, an output) against `limit`.
    fn checked(what: &str, text: String, limit: usize) -> Result<Self, Error> {
        if text.len() > limit {
            return Err(Error::invalid(format!(
                "the {what} is {} bytes; the limit is {limit} bytes — store large data elsewhere and pass a reference",
                text.len()
            )));
        }
        if nesting_depth(&text) > MAX_PAYLOAD_DEPTH {
            return Err(Error::invalid(format!(
                "the {what} is nested more than {MAX_PAYLOAD_DEPTH} levels deep; flatten it"
            )));
        }
        if let Err(e) = check_storable(&text) {
            // Valid JSON skipped without decoding passes this: then the
            // value is JSON no store can hold.
            let syntax = serde_json::from_str::<serde::de::IgnoredAny>(&text).err();
            return Err(Error::invalid(if let Some(e) = syntax {
                format!("the {what} is not valid JSON: {e}")
            } else {
                format!(
                    "the {what} cannot be stored: {e}; send JSON whose strings are valid Unicode \
                     without NUL characters and whose numbers fit a 64-bit float (pass larger \
                     numbers as strings)"
                )
            }));
        }
        Ok(Payload(text))
    }

    /// Serializes a value as the payload.
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Result<Self, Error> {
        let text = serde_json::to_string(value)
            .map_err(|e| Error::invalid(format!("the payload cannot be serialized: {e}")))?;
        Self::from_json_text(text)
    }

    /// Trusted constructor for text read back from storage.
    #[doc(hidden)]
    pub fn from_stored(text: String) -> Self {
        Payload(text)
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Deserializes the payload into `T`.
    pub fn decode<'a, T: Deserialize<'a>>(&'a self) -> Result<T, Error> {
        serde_json::from_str(&self.0).map_err(|e| {
            Error::invalid(format!(
                "the payload does not match the expected shape: {e}"
            ))
        })
    }
}

/// How deeply arrays and objects nest in valid JSON text (0 for a scalar).
/// Counts without recursing, so any depth is measured safely.
fn nesting_depth(json: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for b in json.bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// JSON that every store can hold and every reader can render: it parses
/// (within serde_json's nesting limit of 128), every string and key is
/// valid Unicode (no lone UTF-16 surrogate escapes such as `"\ud800"`) with
/// no NUL character (PostgreSQL's `jsonb`, which its SQL enqueue function
/// takes, cannot hold `\u0000`), and every
/// number fits a finite 64-bit float (`1e400` does not). Anything else is
/// refused when the payload is made, so a stored payload never fails a
/// reader later.
struct Storable;

/// Checks that `text` is one [`Storable`] JSON value. Its nesting was
/// measured first (at most [`MAX_PAYLOAD_DEPTH`]), so the recursion is
/// bounded without serde_json's own limit, which stops one level short.
fn check_storable(text: &str) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    Storable::deserialize(&mut de)?;
    de.end()
}

impl<'de> Deserialize<'de> for Storable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Storable)
    }
}

impl<'de> serde::de::Visitor<'de> for Storable {
    type Value = Storable;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Storable, E> {
        if v.is_finite() {
            Ok(Storable)
        } else {
            Err(E::custom("a number is too large for a 64-bit float"))
        }
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Storable, E> {
        if v.contains('\0') {
            Err(E::custom("a string holds a NUL character (\\u0000)"))
        } else {
            Ok(Storable)
        }
    }

    fn visit_unit<E>(self) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Storable, A::Error> {
        while seq.next_element::<Storable>()?.is_some() {}
        Ok(Storable)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Storable, A::Error> {
        while map.next_entry::<Storable, Storable>()?.is_some() {}
        Ok(Storable)
    }
}

impl Default for Payload {
    fn default() -> Self {
        Payload("{}".to_owned())
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload({})", truncate_for_message(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_must_be_json_within_the_limit() {
        assert!(Payload::from_json_text(r#"{"a":1}"#).is_ok());
        assert!(Payload::from_json_text("{").is_err());
        assert!(Payload::from_json_text_limited("[1,2,3]", 3).is_err());
    }

    #[test]
    fn payloads_a_store_cannot_hold_or_a_reader_cannot_render_are_refused() {
        for bad in [
            r#"{"a":"\ud800"}"#, // a lone leading surrogate
            r#"["x\udc00y"]"#,   // a lone trailing surrogate
            r#"{"\ud800":1}"#,   // ... in a key
            "[1e400]",           // beyond a 64-bit float
            "-1e999999",
            &format!("1{}", "0".repeat(400)),
            r#""a\u0000b""#, // NUL: PostgreSQL's jsonb refuses it
            r#"{"a\u0000":true}"#,
            &format!("{}1{}", "[".repeat(200), "]".repeat(200)), // deeper than 128
        ] {
            let e = Payload::from_json_text(bad).expect_err(bad);
            assert!(matches!(e, Error::Invalid(_)), "{bad}: {e}");
        }
        let msg = Payload::from_json_text("[1e400]")
            .expect_err("refused")
            .to_string();
        assert!(msg.contains("64-bit float"), "{msg}");
        for good in [
            r#"{"a":"\ud83d\ude00","b":"é\n\t"}"#, // a surrogate pair is one character
            "[1.7976931348623157e308, -0, 1e-400, 18446744073709551615, -9223372036854775808]",
            r#""\u0001 control characters other than NUL""#,
            "null",
        ] {
            Payload::from_json_text(good).expect(good);
        }
    }

    #[test]
    fn a_stored_payload_renders_as_it_was_stored() {
        // Text stored before payloads were checked (or written by SQL) still
        // renders, byte for byte, inside a larger answer.
        for stored in [r#"{"a":"\ud800"}"#, "[1e400]", r#""a\u0000b""#] {
            let p = Payload::from_stored(stored.to_owned());
            let out = serde_json::to_string(&[&p]).expect("renders");
            assert_eq!(out, format!("[{stored}]"));
        }
        assert_eq!(nesting_depth(r#"{"a":[1,{"b":"]]}}[[\\\"{{"}]}"#), 3);
        assert_eq!(nesting_depth("7"), 0);
    }

    #[test]
    fn payload_serializes_as_json_not_as_a_string() {
        let p = Payload::from_json_text(r#"{"to":"x"}"#).unwrap();
        assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"to":"x"}"#);
        let back: Payload = serde_json::from_str(r#"{"to":"x"}"#).unwrap();
        assert_eq!(back, p);
    }
}
