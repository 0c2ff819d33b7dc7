//! The names of things: job ids, queue and kind names, lease tokens and
//! W3C trace contexts, each validated where it is made.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;

const MAX_ID_BYTES: usize = 200;
const MAX_NAME_BYTES: usize = 100;

/// A job's stable identity. It never changes across retries, lease expiries
/// and replays. Callers may choose it (one business event, one job id);
/// otherwise a time-ordered UUIDv7 is generated.
///
/// Accepted: 1–200 bytes of letters, digits and `-_.:@/+=`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

impl JobId {
    /// A fresh, time-ordered id (UUIDv7).
    pub fn generate() -> Self {
        JobId(uuid::Uuid::now_v7().to_string())
    }

    /// Validates a caller-chosen id.
    pub fn new(id: impl Into<String>) -> Result<Self, Error> {
        let id = id.into();
        if id.is_empty() || id.len() > MAX_ID_BYTES {
            return Err(Error::invalid(format!(
                "a job id must be 1 to {MAX_ID_BYTES} bytes long (got {} bytes)",
                id.len()
            )));
        }
        if let Some(c) = id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "-_.:@/+=".contains(*c)))
        {
            return Err(Error::invalid(format!(
                "a job id may hold only letters, digits and -_.:@/+= (found {c:?} in {:?})",
                truncate_for_message(&id)
            )));
        }
        Ok(JobId(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

pub(crate) fn truncate_for_message(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

impl TryFrom<String> for JobId {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        JobId::new(s)
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.0
    }
}

impl FromStr for JobId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        JobId::new(s)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobId({})", self.0)
    }
}

/// A queue or job-kind name: 1–100 bytes of letters, digits and `-_.:`,
/// starting with a letter or digit.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Name(pub(crate) String);

impl Name {
    /// Validates a name; `what` ("queue", "kind") appears in the error.
    pub fn parse(what: &str, s: impl Into<String>) -> Result<Self, Error> {
        let s = s.into();
        let ok_len = !s.is_empty() && s.len() <= MAX_NAME_BYTES;
        let ok_first = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        let ok_chars = s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c));
        if ok_len && ok_first && ok_chars {
            Ok(Name(s))
        } else {
            Err(Error::invalid(format!(
                "{what} name {:?} is not valid: use 1 to {MAX_NAME_BYTES} letters, digits or -_.: starting with a letter or digit",
                truncate_for_message(&s)
            )))
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Name {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        Name::parse("the", s)
    }
}

impl From<Name> for String {
    fn from(n: Name) -> String {
        n.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// Proof of ownership of one attempt: 128 bits from the operating system's
/// random source, written fresh by every claim. It is never derived from the
/// job id, so a stale worker cannot guess the current owner's token.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaseToken(String);

impl LeaseToken {
    /// A fresh token: 128 random bits as 32 lowercase hex digits.
    pub fn generate() -> Self {
        let bits: u128 = rand::random();
        LeaseToken(format!("{bits:032x}"))
    }

    /// Wraps a token read from storage or received from a remote worker.
    pub fn from_string(s: String) -> Self {
        LeaseToken(s)
    }

    /// The token as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Enough to correlate in logs, not enough to forge.
        write!(f, "LeaseToken({}…)", &self.0.get(..6).unwrap_or(""))
    }
}

/// A W3C trace context (`traceparent` header, version 00):
/// `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lowercase, with
/// neither id all zeros.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TraceParent(String);

impl TraceParent {
    /// Validates a `traceparent` value.
    pub fn parse(s: impl Into<String>) -> Result<Self, Error> {
        let s = s.into();
        let parts: Vec<&str> = s.split('-').collect();
        let hex = |p: &str, n: usize| {
            p.len() == n
                && p.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let ok = parts.len() == 4
            && parts[0] == "00"
            && hex(parts[1], 32)
            && hex(parts[2], 16)
            && hex(parts[3], 2)
            && parts[1].bytes().any(|b| b != b'0')
            && parts[2].bytes().any(|b| b != b'0');
        if ok {
            Ok(TraceParent(s))
        } else {
            Err(Error::invalid(format!(
                "traceparent {:?} is not a W3C trace context: expected 00-<32 lowercase hex trace id>-<16 hex parent id>-<2 hex flags>, ids not all zeros",
                truncate_for_message(&s)
            )))
        }
    }

    /// The value as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 32-hex-digit trace id.
    pub fn trace_id(&self) -> &str {
        self.0.get(3..35).unwrap_or("")
    }
}

impl TryFrom<String> for TraceParent {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        TraceParent::parse(s)
    }
}

impl From<TraceParent> for String {
    fn from(t: TraceParent) -> String {
        t.0
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceParent({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_follow_the_w3c_format() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let tp = TraceParent::parse(ok).unwrap();
        assert_eq!(tp.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1\u{0}",
        ] {
            let err = TraceParent::parse(bad).unwrap_err().to_string();
            assert!(err.contains("W3C trace context"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn lease_tokens_carry_128_bits_and_differ() {
        let a = LeaseToken::generate();
        let b = LeaseToken::generate();
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert!(!format!("{a:?}").contains(a.as_str()));
    }

    #[test]
    fn ids_and_names_are_validated() {
        assert!(JobId::new("pay_01H:x-y").is_ok());
        assert!(JobId::new("").is_err());
        assert!(JobId::new("a b").is_err());
        assert!(JobId::new("nul\0").is_err());
        assert!(JobId::new("x".repeat(201)).is_err());
        assert!(Name::parse("queue", "mail.high").is_ok());
        assert!(Name::parse("queue", "-x").is_err());
        assert!(Name::parse("kind", "").is_err());
    }
}
