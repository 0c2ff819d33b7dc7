//! Searching jobs by their metadata and by fields of their payloads.
//!
//! A search is a listing ([`JobFilter`]) with terms every job it returns
//! must meet: metadata entries (`key=value`, exact) and payload fields
//! (`payload.customer=42`). The terms are read by this crate, never put
//! into SQL: a store hands over candidates in the listing's order and the
//! search keeps those that match, reading at most [`JobSearch::scan`]
//! candidates a call, and says where it stopped when it stops short.
//!
//! # The path syntax of a payload term
//!
//! `payload` followed by steps, then `=` and a value:
//! - `.name` steps into an object's member (letters, digits, `_` and `-`);
//! - `["any name"]` does the same for a member with any other name (a JSON
//!   string between the brackets);
//! - `[3]` steps into an array's element (counting from 0).
//!
//! The value is JSON (`42`, `true`, `null`, `"42"`, `{"a":1}`) or, when it
//! is not, the text itself as a string: `payload.customer=42` matches the
//! number 42, `payload.customer="42"` the string, `payload.city=Berlin` the
//! string `"Berlin"`. Numbers match by value (`42` matches `42.0`). A job
//! matches when the payload holds exactly that value at that path.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::filter::JobFilter;
use crate::ids::JobId;
use crate::job::Job;
use crate::labels::Meta;
use crate::store::AdminStore;

/// How many candidates a search reads by default before it stops.
pub const DEFAULT_SCAN: u32 = 100_000;
/// The most candidates one search call may read.
pub const MAX_SCAN: u32 = 10_000_000;
/// The most payload terms one search takes.
pub const MAX_PAYLOAD_TERMS: usize = 16;

/// A listing with search terms.
#[derive(Clone, Debug, Default)]
pub struct JobSearch {
    /// The listing searched: which jobs, in which order, one page of how many.
    pub filter: JobFilter,
    /// Metadata entries a job must carry, each exactly.
    pub meta: Meta,
    /// Payload fields a job must hold.
    pub payload: Vec<PayloadTerm>,
    /// At most this many candidates read (default [`DEFAULT_SCAN`], at
    /// most [`MAX_SCAN`]); the page then ends where the reading stopped.
    pub scan: Option<u32>,
}

/// One page of a search.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SearchPage {
    /// The matching jobs, in the listing's order.
    pub jobs: Vec<Job>,
    /// Where the next page starts (pass it as [`JobFilter::after`]), or
    /// `None` when the listing has been read to its end.
    pub next: Option<JobId>,
    /// How many candidates were read for this page.
    pub scanned: u64,
    /// The page ended because [`JobSearch::scan`] candidates were read, not
    /// because it was full or the listing ended: [`SearchPage::next`] is the
    /// last job read, and searching on from it reads further.
    pub stopped: bool,
}

impl JobSearch {
    /// Whether any term is given (without one, a search is a listing).
    pub fn has_terms(&self) -> bool {
        !self.meta.is_empty() || !self.payload.is_empty()
    }

    /// The scan bound in effect.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bound of 0 or above [`MAX_SCAN`].
    pub fn scan_bound(&self) -> Result<u32> {
        match self.scan {
            None => Ok(DEFAULT_SCAN),
            Some(n) if (1..=MAX_SCAN).contains(&n) => Ok(n),
            Some(n) => Err(Error::invalid(format!(
                "a search reads from 1 to {MAX_SCAN} jobs (got a scan bound of {n}); \
                 search on from the page's next job to read further"
            ))),
        }
    }

    /// Checks the terms' number.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming what is out of range.
    pub fn validate(&self) -> Result<()> {
        self.scan_bound()?;
        if self.payload.len() > MAX_PAYLOAD_TERMS {
            return Err(Error::invalid(format!(
                "a search takes at most {MAX_PAYLOAD_TERMS} payload terms (got {})",
                self.payload.len()
            )));
        }
        crate::labels::check_meta(&self.meta)
    }

    /// Whether `job` meets every term.
    pub fn matches(&self, job: &Job) -> bool {
        let meta_ok = self
            .meta
            .iter()
            .all(|(key, value)| job.meta.get(key) == Some(value));
        if !meta_ok {
            return false;
        }
        if self.payload.is_empty() {
            return true;
        }
        match serde_json::from_str::<Value>(job.payload.as_str()) {
            Ok(payload) => self.payload.iter().all(|t| t.matches(&payload)),
            Err(_) => false,
        }
    }
}

/// How many candidates a search reads in its first round trip: enough
/// for a page when most jobs match; each further round trip reads twice
/// as many as the last, up to [`LAST_CHUNK`] (every listing round trip
/// has a cost of its own, which a long search then pays rarely).
const FIRST_CHUNK: u32 = 200;
/// The most candidates one round trip reads (a listing's largest page; the
/// page's byte budget bounds its memory).
const LAST_CHUNK: u32 = 10_000;

/// Reads `search`'s candidates chunk by chunk in the listing's order and
/// keeps those meeting every term, until the page is full (by rows or by
/// its byte budget), the listing ends, or the scan bound is spent.
pub(crate) async fn scan(
    store: &dyn AdminStore,
    keys: Option<&crate::encryption::Keyring>,
    search: &JobSearch,
) -> Result<SearchPage> {
    let bound = u64::from(search.scan_bound()?);
    let want = search.filter.effective_limit() as usize;
    let mut budget = search.filter.page_budget();
    let mut chunk = JobFilter {
        max_bytes: Some(crate::DEFAULT_PAGE_BYTES),
        ..search.filter.clone()
    };
    let mut page = SearchPage::default();
    let mut size = FIRST_CHUNK
        .max(search.filter.effective_limit())
        .min(LAST_CHUNK);
    loop {
        let left = bound - page.scanned;
        chunk.limit = Some(u32::try_from(left.min(u64::from(size))).unwrap_or(size));
        size = size.saturating_mul(2).min(LAST_CHUNK);
        let rows = store.search_candidates(&chunk, &search.meta).await?;
        let more = chunk.next_after(&rows).cloned();
        for mut job in rows {
            page.scanned += 1;
            // Terms read the clear payload; one that does not open matches
            // no payload term.
            crate::encryption::open_job(keys, &mut job);
            if search.matches(&job) {
                let id = job.id.clone();
                let spent = budget.spend(&job);
                page.jobs.push(job);
                if spent || page.jobs.len() >= want {
                    page.next = Some(id);
                    return Ok(page);
                }
            }
        }
        let Some(last) = more else {
            return Ok(page);
        };
        if page.scanned >= bound {
            page.next = Some(last);
            page.stopped = true;
            return Ok(page);
        }
        chunk.after = Some(last);
    }
}

/// One step of a payload path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathStep {
    /// An object's member.
    Key(String),
    /// An array's element.
    Index(usize),
}

/// `payload.PATH=VALUE`: the payload holds `value` at `path`.
#[derive(Clone, Debug, PartialEq)]
pub struct PayloadTerm {
    /// The steps from the payload's root.
    pub path: Vec<PathStep>,
    /// The value held there.
    pub value: Value,
}

impl PayloadTerm {
    /// Parses `payload.PATH=VALUE` (see the module's documentation).
    ///
    /// # Errors
    /// [`Error::Invalid`] saying what is wrong and how a term is written.
    pub fn parse(term: &str) -> Result<Self> {
        let bad = |why: &str| {
            Error::invalid(format!(
                "{why} in the search term {term:?}; a payload term is written \
                 payload.PATH=VALUE, e.g. payload.customer=42, payload.items[0].sku=\"A-1\" \
                 or payload[\"odd name\"]=true"
            ))
        };
        let Some(rest) = term.strip_prefix("payload") else {
            return Err(bad("the path does not start with `payload`"));
        };
        let (path, value) = parse_path(rest).map_err(|why| bad(&why))?;
        if path.is_empty() {
            return Err(bad("the path names no field"));
        }
        let value = match serde_json::from_str::<Value>(value) {
            Ok(v) => v,
            Err(_) => Value::String(value.to_owned()),
        };
        Ok(PayloadTerm { path, value })
    }

    /// Whether `payload` holds this term's value at its path.
    pub fn matches(&self, payload: &Value) -> bool {
        let mut at = payload;
        for step in &self.path {
            let next = match step {
                PathStep::Key(k) => at.as_object().and_then(|o| o.get(k)),
                PathStep::Index(i) => at.as_array().and_then(|a| a.get(*i)),
            };
            match next {
                Some(v) => at = v,
                None => return false,
            }
        }
        same_value(at, &self.value)
    }
}

impl std::fmt::Display for PayloadTerm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("payload")?;
        for step in &self.path {
            match step {
                PathStep::Key(k) if is_plain_key(k) => write!(f, ".{k}")?,
                PathStep::Key(k) => write!(f, "[{}]", Value::String(k.clone()))?,
                PathStep::Index(i) => write!(f, "[{i}]")?,
            }
        }
        write!(f, "={}", self.value)
    }
}

fn is_plain_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The steps of `text` (what follows `payload`) up to `=`, and the value
/// after it.
fn parse_path(mut text: &str) -> std::result::Result<(Vec<PathStep>, &str), String> {
    let mut path = Vec::new();
    loop {
        if let Some(value) = text.strip_prefix('=') {
            return Ok((path, value));
        }
        if let Some(rest) = text.strip_prefix('.') {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(rest.len());
            if end == 0 {
                return Err("a `.` is not followed by a name of letters, digits, `_` or `-` (write [\"name\"] for any other)".to_owned());
            }
            path.push(PathStep::Key(rest[..end].to_owned()));
            text = &rest[end..];
        } else if let Some(rest) = text.strip_prefix('[') {
            let (step, rest) = bracket_step(rest)?;
            path.push(step);
            text = rest;
        } else if text.is_empty() {
            return Err("there is no `=VALUE`".to_owned());
        } else {
            return Err(format!(
                "the path goes on with {:?} where `.`, `[` or `=` was expected",
                text.chars().next().unwrap_or(' ')
            ));
        }
        if path.len() > 32 {
            return Err("the path has more than 32 steps".to_owned());
        }
    }
}

/// A `[…]` step: a JSON string (a member) or a whole number (an element).
fn bracket_step(text: &str) -> std::result::Result<(PathStep, &str), String> {
    if text.starts_with('"') {
        let mut stream = serde_json::Deserializer::from_str(text).into_iter::<String>();
        let name = match stream.next() {
            Some(Ok(name)) => name,
            _ => return Err("a `[\"` does not hold a JSON string".to_owned()),
        };
        let rest = &text[stream.byte_offset()..];
        return match rest.strip_prefix(']') {
            Some(rest) => Ok((PathStep::Key(name), rest)),
            None => Err("a `[\"name\"` is not closed by `]`".to_owned()),
        };
    }
    let end = text.find(']').ok_or("a `[` is not closed by `]`")?;
    match text[..end].parse::<usize>() {
        Ok(i) => Ok((PathStep::Index(i), &text[end + 1..])),
        Err(_) => Err(format!(
            "`[{}]` is neither an element's number nor a quoted name",
            &text[..end]
        )),
    }
}

/// JSON equality, numbers compared by value.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                x == y
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

/// The terms of a search box: whitespace-separated `meta.KEY=VALUE` and
/// `payload.PATH=VALUE` terms (a JSON string value may hold spaces).
///
/// # Errors
/// [`Error::Invalid`] naming the term that is not understood.
pub fn parse_search_box(text: &str) -> Result<(Meta, Vec<PayloadTerm>)> {
    let mut meta = Meta::new();
    let mut payload = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let len = term_len(rest);
        let term = &rest[..len];
        if let Some(pair) = term.strip_prefix("meta.") {
            let (key, value) = crate::labels::parse_meta_pair(pair)?;
            let value = match serde_json::from_str::<Value>(&value) {
                Ok(Value::String(s)) => s,
                _ => value,
            };
            if meta.insert(key.clone(), value).is_some() {
                return Err(Error::invalid(format!(
                    "the metadata key {key:?} is searched twice"
                )));
            }
        } else if term.starts_with("payload") {
            payload.push(PayloadTerm::parse(term)?);
        } else {
            return Err(Error::invalid(format!(
                "the search term {term:?} is not understood; write meta.KEY=VALUE or \
                 payload.PATH=VALUE, separated by spaces"
            )));
        }
        rest = rest[len..].trim_start();
    }
    Ok((meta, payload))
}

/// The length of the term at the start of `text`: up to whitespace, a
/// JSON string right after `=` read whole.
fn term_len(text: &str) -> usize {
    let mut in_string = false;
    let mut escaped = false;
    let mut after_eq = false;
    for (i, c) in text.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c.is_whitespace() {
            return i;
        } else if c == '"' && (after_eq || text[..i].ends_with('[')) {
            in_string = true;
        } else if c == '=' {
            after_eq = true;
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn term(t: &str) -> PayloadTerm {
        PayloadTerm::parse(t).unwrap()
    }

    #[test]
    fn paths_parse_into_steps_and_values() {
        let t = term("payload.customer=42");
        assert_eq!(t.path, vec![PathStep::Key("customer".into())]);
        assert_eq!(t.value, json!(42));
        let t = term(r#"payload.items[2]["odd name"].sku="A 1""#);
        assert_eq!(
            t.path,
            vec![
                PathStep::Key("items".into()),
                PathStep::Index(2),
                PathStep::Key("odd name".into()),
                PathStep::Key("sku".into()),
            ]
        );
        assert_eq!(t.value, json!("A 1"));
        assert_eq!(term("payload.city=Berlin").value, json!("Berlin"));
        assert_eq!(term("payload.x=").value, json!(""));
        assert_eq!(term("payload.ok=true").value, json!(true));
        assert_eq!(term("payload.a=x=y").value, json!("x=y"));
    }

    #[test]
    fn malformed_terms_are_refused_with_the_syntax() {
        for bad in [
            "customer=42",
            "payload=1",
            "payload.customer",
            "payload..a=1",
            "payload.a b=1",
            "payload[x]=1",
            "payload[-1]=1",
            "payload[\"a\"=1",
            "payload[\"a=1",
            "payload.a;drop=1",
            "meta.a=1",
        ] {
            let err = PayloadTerm::parse(bad).unwrap_err().to_string();
            assert!(err.contains("payload.PATH=VALUE"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_term_matches_exactly_the_value_at_its_path() {
        let p = json!({"customer": 42, "items": [{"sku": "A-1"}, {"sku": "B"}],
                       "odd name": {"x": null}, "price": 2.5, "s": "42"});
        assert!(term("payload.customer=42").matches(&p));
        assert!(term("payload.customer=42.0").matches(&p));
        assert!(!term("payload.customer=\"42\"").matches(&p));
        assert!(!term("payload.customer=43").matches(&p));
        assert!(term("payload.s=\"42\"").matches(&p));
        assert!(!term("payload.s=42").matches(&p));
        assert!(term("payload.items[1].sku=B").matches(&p));
        assert!(!term("payload.items[2].sku=B").matches(&p));
        assert!(!term("payload.items.sku=B").matches(&p));
        assert!(term("payload[\"odd name\"].x=null").matches(&p));
        assert!(!term("payload.missing=null").matches(&p));
        assert!(term("payload.price=2.5").matches(&p));
        assert!(term(r#"payload.items[0]={"sku":"A-1"}"#).matches(&p));
    }

    #[test]
    fn a_term_prints_as_it_parses() {
        for t in [
            "payload.customer=42",
            r#"payload.items[2]["odd name"].sku="A 1""#,
        ] {
            assert_eq!(term(t).to_string(), t);
            assert_eq!(term(&term(t).to_string()), term(t));
        }
    }

    #[test]
    fn a_search_box_holds_meta_and_payload_terms() {
        let (meta, payload) =
            parse_search_box(r#" meta.tenant=acme  payload.name="Ada Lovelace" payload.n=1 "#)
                .unwrap();
        assert_eq!(meta.get("tenant").map(String::as_str), Some("acme"));
        assert_eq!(payload.len(), 2);
        assert_eq!(payload[0].value, json!("Ada Lovelace"));
        let (meta, _) = parse_search_box(r#"meta.region="eu west""#).unwrap();
        assert_eq!(meta.get("region").map(String::as_str), Some("eu west"));
        assert!(parse_search_box("customer=42").is_err());
        assert!(parse_search_box("meta.a=1 meta.a=2").is_err());
        assert_eq!(parse_search_box("   ").unwrap(), (Meta::new(), vec![]));
    }

    #[test]
    fn scan_bounds_out_of_range_are_refused() {
        let mut s = JobSearch::default();
        assert_eq!(s.scan_bound().unwrap(), DEFAULT_SCAN);
        s.scan = Some(0);
        assert!(s.validate().is_err());
        s.scan = Some(MAX_SCAN + 1);
        assert!(s.validate().is_err());
        s.scan = Some(MAX_SCAN);
        assert!(s.validate().is_ok());
        s.payload = vec![term("payload.a=1"); MAX_PAYLOAD_TERMS + 1];
        assert!(s.validate().is_err());
    }
}
