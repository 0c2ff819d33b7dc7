//! Timestamps and injectable clocks.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::Error;

/// A point in time: milliseconds since the Unix epoch, UTC.
///
/// Stored as an integer in every backend so that comparisons are exact and
/// cheap. Formatted — in JSON too — as RFC 3339 with millisecond precision;
/// JSON input may be RFC 3339 text or integer milliseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 time or integer milliseconds since the Unix epoch")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Timestamp, E> {
                Ok(Timestamp(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Timestamp, E> {
                i64::try_from(v).map(Timestamp).map_err(E::custom)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Timestamp, E> {
                Timestamp::parse_rfc3339(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// A timestamp from milliseconds since the Unix epoch.
    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// The current wall-clock time of this host.
    pub fn now() -> Self {
        let ms = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
        };
        Timestamp(ms)
    }

    /// This time plus a duration (saturating).
    pub fn plus(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_add(duration_millis(d)))
    }

    /// This time minus a duration (saturating).
    pub fn minus(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_sub(duration_millis(d)))
    }

    /// The duration from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    /// RFC 3339 text with millisecond precision, in UTC (`2026-11-30T10:00:00.000Z`).
    pub fn to_rfc3339(self) -> String {
        let nanos = i128::from(self.0) * 1_000_000;
        match time::OffsetDateTime::from_unix_timestamp_nanos(nanos) {
            Ok(t) => {
                let (y, mo, d) = (t.year(), u8::from(t.month()), t.day());
                format!(
                    "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
                    t.hour(),
                    t.minute(),
                    t.second(),
                    t.millisecond()
                )
            }
            Err(_) => format!("@{}ms", self.0),
        }
    }

    /// Parses RFC 3339 text (any offset; sub-millisecond digits are dropped).
    pub fn parse_rfc3339(text: &str) -> Result<Self, Error> {
        let t = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
            .map_err(|e| {
            Error::invalid(format!(
                "`{text}` is not an RFC 3339 time ({e}); write it like 2026-11-30T14:05:00Z"
            ))
        })?;
        let ms = t.unix_timestamp_nanos() / 1_000_000;
        i64::try_from(ms)
            .map(Timestamp)
            .map_err(|_| Error::invalid(format!("`{text}` is out of range")))
    }
}

fn duration_millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_rfc3339())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

/// A source of the current time.
///
/// SQLite stores read it for every due and lease decision; PostgreSQL stores
/// use the server's clock unless a test injects one.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> Timestamp;

    /// Whether this clock is controlled by a test rather than the host.
    fn is_manual(&self) -> bool {
        false
    }
}

/// The host's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock(Arc::new(AtomicI64::new(start.as_millis())))
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(duration_millis(d), Ordering::SeqCst);
    }

    /// Sets the clock to `t` (backwards too: clock jumps are a test case).
    pub fn set(&self, t: Timestamp) {
        self.0.store(t.as_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }

    fn is_manual(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trip_keeps_milliseconds() {
        let t = Timestamp::from_millis(1_795_000_000_123);
        let text = t.to_rfc3339();
        assert!(text.ends_with(".123Z"), "{text}");
        assert_eq!(Timestamp::parse_rfc3339(&text).ok(), Some(t));
    }

    #[test]
    fn rfc3339_accepts_offsets() {
        let a = Timestamp::parse_rfc3339("2026-11-30T12:00:00+02:00").ok();
        let b = Timestamp::parse_rfc3339("2026-11-30T10:00:00Z").ok();
        assert_eq!(a, b);
        assert!(Timestamp::parse_rfc3339("yesterday").is_err());
    }

    #[test]
    fn json_is_rfc3339_and_accepts_milliseconds_too() {
        let t = Timestamp::from_millis(1_795_996_800_000);
        let text = serde_json::to_string(&t).unwrap();
        assert_eq!(text, r#""2026-11-30T00:00:00.000Z""#);
        assert_eq!(serde_json::from_str::<Timestamp>(&text).unwrap(), t);
        assert_eq!(
            serde_json::from_str::<Timestamp>("1795996800000").unwrap(),
            t
        );
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(Timestamp::from_millis(1000));
        assert_eq!(c.now().as_millis(), 1000);
        c.advance(Duration::from_millis(250));
        assert_eq!(c.clone().now().as_millis(), 1250);
        c.set(Timestamp::from_millis(10));
        assert_eq!(c.now().as_millis(), 10);
    }
}
