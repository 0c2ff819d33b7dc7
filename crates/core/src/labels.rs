//! What a job carries to be found and read by people: the workflow it is a
//! step of, its tags and its metadata. None of them changes how the job
//! runs.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;

const MAX_WORKFLOW_ID_BYTES: usize = 200;
/// The longest tag, in bytes.
pub const MAX_TAG_BYTES: usize = 100;
/// The most tags one job may carry.
pub const MAX_TAGS: usize = 20;
/// The most metadata entries one job may carry.
pub const MAX_META_ENTRIES: usize = 32;
/// The longest metadata key, in bytes.
pub const MAX_META_KEY_BYTES: usize = 100;
/// The longest metadata value, in bytes.
pub const MAX_META_VALUE_BYTES: usize = 1000;

/// Metadata: short text values by key, shown with the job.
pub type Meta = BTreeMap<String, String>;

/// The id of a workflow: the jobs enqueued together as one graph of steps
/// carry it, and the operator's workflow views and actions take it.
///
/// Accepted, like a job id: 1–200 bytes of letters, digits and `-_.:@/+=`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct WorkflowId(String);

impl WorkflowId {
    /// A fresh, time-ordered id (UUIDv7).
    pub fn generate() -> Self {
        WorkflowId(uuid::Uuid::now_v7().to_string())
    }

    /// Validates a caller-chosen id.
    pub fn new(id: impl Into<String>) -> Result<Self, Error> {
        let id = id.into();
        if id.is_empty() || id.len() > MAX_WORKFLOW_ID_BYTES {
            return Err(Error::invalid(format!(
                "a workflow id must be 1 to {MAX_WORKFLOW_ID_BYTES} bytes long (got {} bytes)",
                id.len()
            )));
        }
        if let Some(c) = id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "-_.:@/+=".contains(*c)))
        {
            return Err(Error::invalid(format!(
                "a workflow id may hold only letters, digits and -_.:@/+= (found {c:?})"
            )));
        }
        Ok(WorkflowId(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for WorkflowId {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        WorkflowId::new(s)
    }
}

impl From<WorkflowId> for String {
    fn from(id: WorkflowId) -> String {
        id.0
    }
}

impl FromStr for WorkflowId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        WorkflowId::new(s)
    }
}

impl fmt::Display for WorkflowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for WorkflowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WorkflowId({})", self.0)
    }
}

/// Checks one tag: 1–100 bytes of letters, digits and `-_.:/=@+`.
///
/// # Errors
/// [`Error::Invalid`] saying what is wrong with it.
pub fn check_tag(tag: &str) -> Result<(), Error> {
    if tag.is_empty() || tag.len() > MAX_TAG_BYTES {
        return Err(Error::invalid(format!(
            "a tag must be 1 to {MAX_TAG_BYTES} bytes long (got {} bytes)",
            tag.len()
        )));
    }
    if let Some(c) = tag
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_.:/=@+".contains(*c)))
    {
        return Err(Error::invalid(format!(
            "a tag may hold only letters, digits and -_.:/=@+ (found {c:?} in {tag:?})"
        )));
    }
    Ok(())
}

/// Checks a job's tags: each valid, at most [`MAX_TAGS`], none twice.
///
/// # Errors
/// [`Error::Invalid`] naming the first problem.
pub fn check_tags(tags: &[String]) -> Result<(), Error> {
    if tags.len() > MAX_TAGS {
        return Err(Error::invalid(format!(
            "a job may carry at most {MAX_TAGS} tags (got {})",
            tags.len()
        )));
    }
    for (i, tag) in tags.iter().enumerate() {
        check_tag(tag)?;
        if tags[..i].contains(tag) {
            return Err(Error::invalid(format!("the tag {tag:?} is given twice")));
        }
    }
    Ok(())
}

/// Checks a job's metadata: at most [`MAX_META_ENTRIES`] entries, keys of
/// 1–100 letters, digits and `-_.:`, values of at most 1,000 bytes without
/// control characters.
///
/// # Errors
/// [`Error::Invalid`] naming the first problem.
pub fn check_meta(meta: &Meta) -> Result<(), Error> {
    if meta.len() > MAX_META_ENTRIES {
        return Err(Error::invalid(format!(
            "a job may carry at most {MAX_META_ENTRIES} metadata entries (got {})",
            meta.len()
        )));
    }
    for (key, value) in meta {
        let ok_key = !key.is_empty()
            && key.len() <= MAX_META_KEY_BYTES
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c));
        if !ok_key {
            return Err(Error::invalid(format!(
                "the metadata key {key:?} is not valid: use 1 to {MAX_META_KEY_BYTES} letters, digits or -_.:"
            )));
        }
        if value.len() > MAX_META_VALUE_BYTES {
            return Err(Error::invalid(format!(
                "the metadata value of {key:?} is {} bytes; the limit is {MAX_META_VALUE_BYTES}",
                value.len()
            )));
        }
        if has_control(value) {
            return Err(Error::invalid(format!(
                "the metadata value of {key:?} holds a control character; use plain text"
            )));
        }
    }
    Ok(())
}

/// Whether `text` holds a control character (C0 such as ESC or a line
/// break, DEL, or C1): the rule for text people read, which must not move
/// a terminal's cursor, colour its screen or start a line of its own.
/// Metadata values holding one are refused ([`check_meta`]).
pub(crate) fn has_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

/// `text` with each control character ([`has_control`]) replaced by
/// U+FFFD: the same rule for text that is kept rather than refused (a
/// progress message, reported on a lease renewal that must not fail over
/// it).
pub(crate) fn without_controls(text: String) -> String {
    if has_control(&text) {
        text.chars()
            .map(|c| if c.is_control() { '\u{fffd}' } else { c })
            .collect()
    } else {
        text
    }
}

/// Parses `KEY=VALUE` (the CLI's `--meta`).
///
/// # Errors
/// [`Error::Invalid`] when there is no `=`.
pub fn parse_meta_pair(pair: &str) -> Result<(String, String), Error> {
    match pair.split_once('=') {
        Some((key, value)) => Ok((key.to_owned(), value.to_owned())),
        None => Err(Error::invalid(format!(
            "metadata is given as KEY=VALUE (got {pair:?})"
        ))),
    }
}

/// `KEY=VALUE` pairs (flags, query parameters) as metadata; a key given
/// twice is refused.
///
/// # Errors
/// [`Error::Invalid`] for a pair without `=` or a key given twice.
pub fn meta_from_pairs<'a>(pairs: impl IntoIterator<Item = &'a str>) -> Result<Meta, Error> {
    let mut meta = Meta::new();
    for pair in pairs {
        let (key, value) = parse_meta_pair(pair)?;
        if meta.insert(key.clone(), value).is_some() {
            return Err(Error::invalid(format!(
                "the metadata key {key:?} is given twice"
            )));
        }
    }
    Ok(meta)
}

/// Tags as stored (a JSON array), read leniently: they describe the job
/// and never stop it from being read, so a stored value that is not an
/// array of strings reads as no tags.
pub fn tags_from_stored(text: Option<&str>) -> Vec<String> {
    text.and_then(|t| serde_json::from_str::<Vec<String>>(t).ok())
        .unwrap_or_default()
}

/// Metadata as stored (a JSON object), read leniently like
/// [`tags_from_stored`]: a value that is not a string is shown as its JSON
/// text, and a stored value that is not an object reads as none.
pub fn meta_from_stored(text: Option<&str>) -> Meta {
    let Some(map) = text
        .and_then(|t| serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(t).ok())
    else {
        return Meta::new();
    };
    map.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => (k, s),
            other => (k, other.to_string()),
        })
        .collect()
}

/// Tags as stored: `None` for none, else a JSON array.
pub fn tags_to_stored(tags: &[String]) -> Option<String> {
    (!tags.is_empty()).then(|| serde_json::Value::from(tags.to_vec()).to_string())
}

/// Metadata as stored: `None` for none, else a JSON object.
pub fn meta_to_stored(meta: &Meta) -> Option<String> {
    (!meta.is_empty()).then(|| {
        serde_json::Value::Object(
            meta.iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        )
        .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_ids_follow_the_job_id_rules() {
        assert!(WorkflowId::new("order-7/fulfil").is_ok());
        let err = WorkflowId::new("a b").unwrap_err().to_string();
        assert!(err.contains("workflow id may hold only"), "{err}");
        assert!(WorkflowId::new("").is_err());
        assert!(WorkflowId::new("x".repeat(201)).is_err());
    }

    #[test]
    fn tags_are_checked_one_by_one_and_as_a_set() {
        assert!(check_tags(&["customer:42".into(), "eu".into()]).is_ok());
        let twice = check_tags(&["eu".into(), "eu".into()]).unwrap_err();
        assert!(twice.to_string().contains("given twice"), "{twice}");
        let spaced = check_tags(&["a b".into()]).unwrap_err();
        assert!(spaced.to_string().contains("' '"), "{spaced}");
        let many: Vec<String> = (0..21).map(|i| format!("t{i}")).collect();
        assert!(
            check_tags(&many)
                .unwrap_err()
                .to_string()
                .contains("at most 20")
        );
    }

    #[test]
    fn metadata_keys_and_values_are_bounded() {
        let mut meta = Meta::new();
        meta.insert("customer".into(), "Ada Lovelace".into());
        assert!(check_meta(&meta).is_ok());
        meta.insert("bad key".into(), "x".into());
        assert!(
            check_meta(&meta)
                .unwrap_err()
                .to_string()
                .contains("bad key")
        );
        let mut long = Meta::new();
        long.insert("k".into(), "x".repeat(1001));
        assert!(
            check_meta(&long)
                .unwrap_err()
                .to_string()
                .contains("1001 bytes")
        );
        let mut control = Meta::new();
        control.insert("k".into(), "a\nb".into());
        assert!(check_meta(&control).is_err());
        assert_eq!(
            parse_meta_pair("a=b=c").unwrap(),
            ("a".to_owned(), "b=c".to_owned())
        );
        assert!(parse_meta_pair("ab").is_err());
    }

    #[test]
    fn stored_labels_read_leniently_and_round_trip() {
        assert_eq!(tags_from_stored(Some("[\"a\",\"b\"]")), vec!["a", "b"]);
        assert!(tags_from_stored(Some("{\"not\":\"a list\"}")).is_empty());
        assert!(tags_from_stored(Some("not json")).is_empty());
        assert!(tags_from_stored(None).is_empty());
        let meta = meta_from_stored(Some("{\"a\":\"x\",\"n\":3}"));
        assert_eq!(meta.get("a").map(String::as_str), Some("x"));
        assert_eq!(meta.get("n").map(String::as_str), Some("3"));
        assert!(meta_from_stored(Some("[1]")).is_empty());
        let tags = vec!["x".to_owned(), "y".to_owned()];
        assert_eq!(tags_from_stored(tags_to_stored(&tags).as_deref()), tags);
        assert_eq!(tags_to_stored(&[]), None);
        let mut m = Meta::new();
        m.insert("k".into(), "v \"quoted\"".into());
        assert_eq!(meta_from_stored(meta_to_stored(&m).as_deref()), m);
        assert_eq!(meta_to_stored(&Meta::new()), None);
    }
}
