//! A table's checksum, the same whichever side it is read from: each row's
//! values in one canonical form (times as epoch milliseconds, flags as
//! booleans, JSON parsed — so `jsonb`'s reordered keys and spacing do not
//! count), hashed with SHA-256, and the rows' hashes added up modulo
//! 2^128. The sum does not depend on the order rows are read in, so each
//! side is read in whatever order is cheapest.

use errand_core::{Error, Result};
use errand_sqlite::rusqlite;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::tables::Kind;

/// The rows read and their hashes' sum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Checksum {
    pub(crate) rows: u64,
    sum: u128,
}

impl Checksum {
    /// Adds one row (its canonical values, in column order).
    pub(crate) fn add(&mut self, row: &[Value]) {
        let text = Value::Array(row.to_vec()).to_string();
        let hash = Sha256::digest(text.as_bytes());
        let mut first = [0u8; 16];
        first.copy_from_slice(&hash[..16]);
        self.sum = self.sum.wrapping_add(u128::from_be_bytes(first));
        self.rows += 1;
    }

    /// The sum as 32 hexadecimal digits.
    pub(crate) fn hex(&self) -> String {
        format!("{:032x}", self.sum)
    }
}

/// A value read from SQLite as it is sent to PostgreSQL: JSON still as
/// its text ([`canonical`] parses it).
pub(crate) fn from_sqlite(
    kind: Kind,
    value: rusqlite::types::ValueRef<'_>,
    column: &str,
) -> Result<Value> {
    use rusqlite::types::ValueRef as V;
    let wrong = |found: &str| {
        Error::storage(format!(
            "column {column} holds {found}, which is not the {kind:?} value the schema stores there"
        ))
    };
    Ok(match (kind, value) {
        (_, V::Null) => Value::Null,
        (Kind::Int | Kind::Time, V::Integer(n)) => Value::from(n),
        (Kind::Bool, V::Integer(n)) => Value::Bool(n != 0),
        (Kind::Real, V::Real(f)) => Value::from(f),
        (Kind::Real, V::Integer(n)) => Value::from(n as f64),
        (Kind::Text | Kind::Json | Kind::Jsonb | Kind::JsonText, V::Text(t)) => {
            Value::String(text(t, column)?)
        }
        (_, V::Integer(_)) => return Err(wrong("an integer")),
        (_, V::Real(_)) => return Err(wrong("a real number")),
        (_, V::Text(_)) => return Err(wrong("text")),
        (_, V::Blob(_)) => return Err(wrong("a blob")),
    })
}

/// A value as [`from_sqlite`] reads it in its canonical form.
pub(crate) fn canonical(kind: Kind, value: &Value, column: &str) -> Result<Value> {
    match (kind, value) {
        (Kind::Json | Kind::Jsonb | Kind::JsonText, Value::String(t)) => parse_json(t, column),
        _ => Ok(value.clone()),
    }
}

/// A value read from PostgreSQL as text ([`Kind::read_expr`]) in its
/// canonical form.
pub(crate) fn from_postgres(kind: Kind, text: Option<&str>, column: &str) -> Result<Value> {
    let Some(t) = text else {
        return Ok(Value::Null);
    };
    let bad = || Error::storage(format!("column {column} holds {t:?}, not a {kind:?} value"));
    Ok(match kind {
        Kind::Text => Value::String(t.to_owned()),
        Kind::Int | Kind::Time => Value::from(t.parse::<i64>().map_err(|_| bad())?),
        Kind::Bool => match t {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return Err(bad()),
        },
        Kind::Real => Value::from(t.parse::<f64>().map_err(|_| bad())?),
        Kind::Json | Kind::Jsonb | Kind::JsonText => parse_json(t, column)?,
    })
}

fn text(bytes: &[u8], column: &str) -> Result<String> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Error::storage(format!("column {column} holds text that is not UTF-8")))
}

fn parse_json(text: &str, column: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| {
        Error::storage(format!(
            "column {column} holds JSON that does not parse: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::types::ValueRef;

    #[test]
    fn both_sides_agree_on_the_canonical_form() {
        let cases: [(Kind, ValueRef<'_>, Option<&str>); 7] = [
            (
                Kind::Time,
                ValueRef::Integer(1_765_144_800_123),
                Some("1765144800123"),
            ),
            (Kind::Bool, ValueRef::Integer(1), Some("true")),
            (
                Kind::Jsonb,
                ValueRef::Text(br#"{"b": 1, "a": [1.5]}"#),
                Some(r#"{"a": [1.5], "b": 1}"#),
            ),
            (
                Kind::Json,
                ValueRef::Text(br#"{"x":"y"}"#),
                Some(r#"{"x":"y"}"#),
            ),
            (Kind::Real, ValueRef::Real(0.1), Some("0.1")),
            (Kind::Text, ValueRef::Text(b"caf\xc3\xa9"), Some("café")),
            (Kind::Int, ValueRef::Null, None),
        ];
        for (kind, sqlite, pg) in cases {
            assert_eq!(
                canonical(kind, &from_sqlite(kind, sqlite, "c").unwrap(), "c").unwrap(),
                from_postgres(kind, pg, "c").unwrap(),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn the_sum_ignores_order_and_counts_every_difference() {
        let rows = [
            vec![Value::from(1), Value::from("a")],
            vec![Value::from(2), Value::from("b")],
            vec![Value::from(3), Value::Null],
        ];
        let mut forward = Checksum::default();
        rows.iter().for_each(|r| forward.add(r));
        let mut backward = Checksum::default();
        rows.iter().rev().for_each(|r| backward.add(r));
        assert_eq!(forward, backward);
        let mut changed = Checksum::default();
        changed.add(&rows[0]);
        changed.add(&rows[1]);
        changed.add(&[Value::from(3), Value::from("")]);
        assert_ne!(forward.hex(), changed.hex());
        assert_eq!(changed.rows, 3);
        let mut flag = Checksum::default();
        flag.add(&[Value::Bool(true)]);
        let mut one = Checksum::default();
        one.add(&[Value::from(1)]);
        assert_ne!(flag, one, "a flag is not the number 1");
    }

    #[test]
    fn a_value_of_the_wrong_type_is_refused_with_its_column() {
        let e = from_sqlite(Kind::Time, ValueRef::Text(b"yesterday"), "created_at").unwrap_err();
        assert!(e.to_string().contains("created_at"), "{e}");
        let e = from_postgres(Kind::Bool, Some("maybe"), "met").unwrap_err();
        assert!(e.to_string().contains("met"), "{e}");
    }
}
