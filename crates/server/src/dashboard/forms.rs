//! Form bodies and query strings, and the checks on what they carry.

use errand::{JobFilter, JobId, JobState, Name};

use super::error::PageError;
use super::view::{CSRF_FIELD, truncate};

/// The largest operator name and reason (bytes): the library's limits.
pub(super) use errand::core::{MAX_OPERATOR_BYTES, MAX_REASON_BYTES};
/// The largest error-text filter (bytes).
const MAX_ERROR_FILTER_BYTES: usize = 200;
/// Rows per page unless `limit` says otherwise.
pub(super) const DEFAULT_PAGE: u32 = 50;
/// The most rows one page (and one bulk replay) may hold.
pub(super) const MAX_PAGE: u32 = 200;

/// A parsed `application/x-www-form-urlencoded` body or query string, in
/// order, repeated names kept.
#[derive(Clone, Debug, Default)]
pub(crate) struct Form(Vec<(String, String)>);

impl Form {
    pub(super) fn parse(bytes: &[u8]) -> Form {
        Form(
            form_urlencoded::parse(bytes)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub(super) fn csrf(&self) -> Option<&str> {
        match self.all(CSRF_FIELD)[..] {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Every value of `name`.
    pub(super) fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The first value of `name` as entered, or empty: what a refused
    /// form shows again.
    pub(super) fn first(&self, name: &str) -> String {
        self.all(name)
            .first()
            .map_or_else(String::new, |s| (*s).to_owned())
    }

    /// The value of `name` when given once and not empty; an error when
    /// given more than once.
    pub(super) fn one(&self, name: &str) -> Result<Option<&str>, PageError> {
        match self.all(name)[..] {
            [] => Ok(None),
            [one] => Ok(Some(one).filter(|v| !v.is_empty())),
            _ => Err(PageError::bad_request(format!(
                "The field `{name}` was given more than once; give it once."
            ))),
        }
    }

    /// Refuses fields other than `allowed` (and the CSRF token), so a
    /// mistyped parameter is reported instead of silently ignored.
    pub(super) fn only(&self, allowed: &[&str]) -> Result<(), PageError> {
        match self
            .0
            .iter()
            .find(|(k, _)| k != CSRF_FIELD && !allowed.contains(&k.as_str()))
        {
            None => Ok(()),
            Some((k, _)) => Err(PageError::bad_request(format!(
                "Unknown parameter `{}`; this page takes {}.",
                truncate(k, 40),
                allowed.join(", ")
            ))),
        }
    }
}

pub(super) fn job_id(text: &str) -> Result<JobId, PageError> {
    JobId::new(text).map_err(|e| PageError::bad_request(detail(e)))
}

pub(super) fn detail(e: errand::Error) -> String {
    match e {
        errand::Error::Invalid(m) => m,
        other => other.to_string(),
    }
}

/// The operator and reason of a replay or cancel, checked: printable text,
/// not blank, within the audit log's bounds.
#[derive(Clone, Debug, Default)]
pub(super) struct Audit {
    pub(super) operator: String,
    pub(super) reason: String,
}

impl Audit {
    /// What the form says, unchecked (to show it again on a refusal).
    pub(super) fn entered(form: &Form) -> Audit {
        let first = |name| form.all(name).first().map(|s| s.to_string());
        Audit {
            operator: first("operator").unwrap_or_default(),
            reason: first("reason").unwrap_or_default(),
        }
    }

    /// The operator and reason a confirmation form posted (each once),
    /// checked; on a refusal, what was entered (to show the form again) and
    /// what to fix.
    pub(super) fn posted(form: &Form) -> Result<Audit, (Audit, String)> {
        let entered = Audit::entered(form);
        match form
            .one("operator")
            .and(form.one("reason"))
            .map_err(|e| e.message)
            .and_then(|_| entered.check())
        {
            Ok(()) => Ok(entered),
            Err(problem) => Err((entered, problem)),
        }
    }

    /// Checks the operator and reason; the message says what to fix.
    pub(super) fn check(&self) -> Result<(), String> {
        audit_text(
            "operator",
            "Your name",
            &self.operator,
            MAX_OPERATOR_BYTES,
            false,
        )?;
        audit_text("reason", "The reason", &self.reason, MAX_REASON_BYTES, true)
    }
}

fn audit_text(
    field: &str,
    label: &str,
    value: &str,
    max: usize,
    line_breaks: bool,
) -> Result<(), String> {
    // The library's rule decides; the checks below only word the refusal.
    if errand::core::is_audit_text(value, max, line_breaks) {
        return Ok(());
    }
    if value.trim().is_empty() {
        return Err(format!(
            "{label} (`{field}`) is required: it goes into the audit log."
        ));
    }
    if value.len() > max {
        return Err(format!(
            "{label} (`{field}`) is {} bytes long; the limit is {max} bytes.",
            value.len()
        ));
    }
    if value
        .chars()
        .any(|c| c.is_control() && !(line_breaks && matches!(c, '\n' | '\r' | '\t')))
    {
        return Err(format!(
            "{label} (`{field}`) may hold only printable text{}.",
            if line_breaks {
                " (line breaks and tabs are allowed)"
            } else {
                ""
            }
        ));
    }
    Err(format!(
        "{label} (`{field}`) is not accepted: at most {max} bytes of printable text."
    ))
}

/// The filters of a jobs or dead-letter listing, and its page.
#[derive(Clone, Debug, Default)]
pub(super) struct ListParams {
    pub(super) state: Option<JobState>,
    pub(super) queue: Option<Name>,
    pub(super) kind: Option<Name>,
    pub(super) error: Option<String>,
    pub(super) tag: Option<String>,
    /// The search box as typed (`meta.KEY=VALUE payload.PATH=VALUE …`).
    pub(super) q: Option<String>,
    /// Its terms.
    pub(super) terms: (errand::core::Meta, Vec<errand::PayloadTerm>),
    pub(super) after: Option<JobId>,
    pub(super) limit: u32,
}

const LIST_FIELDS: [&str; 8] = [
    "state", "queue", "kind", "error", "tag", "q", "after", "limit",
];

/// The longest search box accepted.
const MAX_SEARCH_BYTES: usize = 1_000;

impl ListParams {
    /// Reads and checks the query string of a listing, which may also hold
    /// the parameters named in `extra` (returned in the form).
    pub(super) fn parse(
        query: Option<&str>,
        extra: &[&str],
    ) -> Result<(ListParams, Form), PageError> {
        let form = Form::parse(query.unwrap_or("").as_bytes());
        let allowed: Vec<&str> = LIST_FIELDS.iter().chain(extra).copied().collect();
        form.only(&allowed)?;
        let bad = |e: errand::Error| PageError::bad_request(detail(e));
        let error = match form.one("error")? {
            Some(e) if e.len() > MAX_ERROR_FILTER_BYTES || e.chars().any(char::is_control) => {
                return Err(PageError::bad_request(format!(
                    "The error-text filter must be at most {MAX_ERROR_FILTER_BYTES} bytes of printable text."
                )));
            }
            e => e.map(str::to_owned),
        };
        let limit = match form.one("limit")? {
            None => DEFAULT_PAGE,
            Some(text) => match text.parse::<u32>() {
                Ok(n @ 1..=MAX_PAGE) => n,
                _ => {
                    return Err(PageError::bad_request(format!(
                        "The page size `limit` must be a whole number from 1 to {MAX_PAGE} (got {:?}).",
                        truncate(text, 20)
                    )));
                }
            },
        };
        let params = ListParams {
            state: form
                .one("state")?
                .map(str::parse::<JobState>)
                .transpose()
                .map_err(bad)?,
            queue: form
                .one("queue")?
                .map(|q| Name::parse("queue", q))
                .transpose()
                .map_err(bad)?,
            kind: form
                .one("kind")?
                .map(|k| Name::parse("kind", k))
                .transpose()
                .map_err(bad)?,
            error,
            tag: match form.one("tag")? {
                Some(t) => {
                    errand::core::check_tag(t).map_err(bad)?;
                    Some(t.to_owned())
                }
                None => None,
            },
            q: None,
            terms: Default::default(),
            after: form.one("after")?.map(job_id).transpose()?,
            limit,
        };
        let params = match form.one("q")?.map(str::trim).filter(|q| !q.is_empty()) {
            None => params,
            Some(q) if q.len() > MAX_SEARCH_BYTES => {
                return Err(PageError::bad_request(format!(
                    "The search must be at most {MAX_SEARCH_BYTES} bytes (got {}).",
                    q.len()
                )));
            }
            Some(q) => {
                let terms = errand::core::parse_search_box(q).map_err(bad)?;
                ListParams {
                    q: Some(q.to_owned()),
                    terms,
                    ..params
                }
            }
        };
        Ok((params, form))
    }

    /// The store's filter for this page.
    pub(super) fn filter(&self) -> JobFilter {
        JobFilter {
            state: self.state,
            queue: self.queue.clone(),
            kind: self.kind.clone(),
            error_contains: self.error.clone(),
            tag: self.tag.clone(),
            limit: Some(self.limit),
            after: self.after.clone(),
            max_bytes: Some(errand::core::DEFAULT_PAGE_BYTES),
            ..JobFilter::default()
        }
    }

    /// The search for this page: its filter and the search box's terms.
    pub(super) fn search(&self) -> errand::JobSearch {
        errand::JobSearch {
            filter: self.filter(),
            meta: self.terms.0.clone(),
            payload: self.terms.1.clone(),
            scan: None,
        }
    }

    /// The query string of these filters, starting after `after` (the
    /// first page when `None`).
    pub(super) fn query(&self, after: Option<&JobId>) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        if let Some(s) = self.state {
            q.append_pair("state", s.as_str());
        }
        if let Some(v) = &self.queue {
            q.append_pair("queue", v.as_str());
        }
        if let Some(v) = &self.kind {
            q.append_pair("kind", v.as_str());
        }
        if let Some(v) = &self.error {
            q.append_pair("error", v);
        }
        if let Some(v) = &self.tag {
            q.append_pair("tag", v);
        }
        if let Some(v) = &self.q {
            q.append_pair("q", v);
        }
        if self.limit != DEFAULT_PAGE {
            q.append_pair("limit", &self.limit.to_string());
        }
        if let Some(a) = after {
            q.append_pair("after", a.as_str());
        }
        q.finish()
    }
}

/// A job id as one path segment: everything but unreserved characters
/// percent-encoded (ids may hold `/`, `+`, `:`, `@`, `=`).
pub(super) fn id_segment(id: &JobId) -> String {
    segment(id.as_str())
}

/// Text as one path segment, encoded like [`id_segment`].
pub(super) fn segment(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The job page's path.
pub(super) fn job_path(id: &JobId) -> String {
    format!("/dashboard/jobs/{}", id_segment(id))
}

/// A listing's path with its query string.
pub(super) fn with_query(path: &str, query: &str) -> String {
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn listing_parameters_are_checked() {
        let (p, _) = ListParams::parse(
            Some("state=dead&queue=mail&kind=&error=smtp+down&limit=20"),
            &[],
        )
        .expect("valid");
        assert_eq!(p.state, Some(JobState::Dead));
        assert_eq!(p.queue.as_ref().map(Name::as_str), Some("mail"));
        assert!(p.kind.is_none(), "empty means not given");
        assert_eq!(p.error.as_deref(), Some("smtp down"));
        assert_eq!(p.limit, 20);
        assert_eq!(
            p.query(None),
            "state=dead&queue=mail&error=smtp+down&limit=20"
        );
        for bad in [
            "state=stuck",
            "queue=-x",
            "limit=0",
            "limit=201",
            "after=a%20b",
            "colour=red",
            "state=dead&state=ready",
        ] {
            let e = ListParams::parse(Some(bad), &[]).expect_err(bad);
            assert!(e.message.len() > 20, "{bad}: {}", e.message);
        }
    }

    #[test]
    fn audit_text_is_required_and_bounded() {
        let ok = Audit {
            operator: "alice".into(),
            reason: "SMTP relay fixed\nretrying".into(),
        };
        assert!(ok.check().is_ok());
        for (operator, reason) in [
            ("", "r"),
            ("  ", "r"),
            ("alice", ""),
            ("alice", " \n "),
            ("a\nb", "r"),
            ("alice", "nul\0"),
        ] {
            let a = Audit {
                operator: operator.into(),
                reason: reason.into(),
            };
            assert!(a.check().is_err(), "{operator:?} {reason:?}");
        }
        let long = Audit {
            operator: "x".repeat(MAX_OPERATOR_BYTES + 1),
            reason: "r".into(),
        };
        assert!(long.check().expect_err("too long").contains("200 bytes"));
        let long = Audit {
            operator: "x".repeat(MAX_OPERATOR_BYTES),
            reason: "r".repeat(MAX_REASON_BYTES + 1),
        };
        assert!(long.check().expect_err("too long").contains("2000 bytes"));
    }

    #[test]
    fn ids_are_one_path_segment() {
        let id = JobId::new("pay/17+x:y@z=w").expect("valid id");
        assert_eq!(id_segment(&id), "pay%2F17%2Bx%3Ay%40z%3Dw");
    }
}
