//! `GET /v1/jobs`: a page of jobs by the listing's filters, searched by
//! metadata entries (`meta=KEY=VALUE`) and payload fields
//! (`where=payload.PATH=VALUE`), each parameter repeatable.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use errand::{JobFilter, JobId, JobSearch, JobState, Name, PayloadTerm};
use serde::Serialize;

use crate::problem::Problem;
use crate::request::{Answer, App, json, page_limit};

/// A page of jobs; `scanned` and `stopped` when searched.
#[derive(Serialize)]
struct JobPage<'a> {
    jobs: &'a [errand::Job],
    next: Option<&'a JobId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scanned: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped: Option<bool>,
}

const PARAMETERS: &str =
    "the parameters are state, queue, kind, tag, workflow, meta, where, scan, limit and after";

/// The parameters given once each, and the repeatable ones.
#[derive(Default)]
struct Params {
    one: std::collections::BTreeMap<String, String>,
    meta: Vec<String>,
    terms: Vec<String>,
}

impl Params {
    fn parse(query: Option<&str>) -> Result<Self, Problem> {
        let mut p = Params::default();
        let mut seen = std::collections::BTreeSet::new();
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let value = value.into_owned();
            match key.as_ref() {
                // An empty parameter (`?state=`) means "not given".
                "meta" | "where" if value.is_empty() => {}
                "meta" => p.meta.push(value),
                "where" => p.terms.push(value),
                "state" | "queue" | "kind" | "tag" | "workflow" | "scan" | "limit" | "after" => {
                    if !seen.insert(key.clone().into_owned()) {
                        return Err(Problem::malformed_json(format!(
                            "the parameter {key} is given twice; only meta and where repeat"
                        )));
                    }
                    if !value.is_empty() {
                        p.one.insert(key.into_owned(), value);
                    }
                }
                other => {
                    return Err(Problem::malformed_json(format!(
                        "unknown parameter {other:?}; {PARAMETERS}"
                    )));
                }
            }
        }
        Ok(p)
    }

    fn take(&mut self, key: &str) -> Option<String> {
        self.one.remove(key)
    }
}

pub(crate) async fn list(State(app): State<App>, RawQuery(query): RawQuery) -> Answer {
    let search = search_of(Params::parse(query.as_deref())?)?;
    let page = app.admin.search(&search).await?;
    let searched = search.has_terms();
    json(
        StatusCode::OK,
        &JobPage {
            jobs: &page.jobs,
            next: page.next.as_ref(),
            scanned: searched.then_some(page.scanned),
            stopped: searched.then_some(page.stopped),
        },
    )
}

fn search_of(mut q: Params) -> Result<JobSearch, Problem> {
    let limit = page_limit(q.take("limit"))?;
    let tag = q.take("tag");
    if let Some(tag) = &tag {
        errand::core::check_tag(tag)?;
    }
    let meta = errand::core::meta_from_pairs(q.meta.iter().map(String::as_str))?;
    let search = JobSearch {
        filter: JobFilter {
            tag,
            workflow: q
                .take("workflow")
                .map(errand::core::WorkflowId::new)
                .transpose()?,
            state: q.take("state").map(|s| s.parse::<JobState>()).transpose()?,
            queue: q
                .take("queue")
                .map(|s| Name::parse("queue", s))
                .transpose()?,
            kind: q.take("kind").map(|s| Name::parse("kind", s)).transpose()?,
            limit: Some(limit),
            after: q.take("after").map(JobId::new).transpose()?,
            max_bytes: Some(errand::core::DEFAULT_PAGE_BYTES),
            ..JobFilter::default()
        },
        meta,
        payload: q
            .terms
            .iter()
            .map(|t| PayloadTerm::parse(t))
            .collect::<Result<_, _>>()?,
        scan: match q.take("scan") {
            None => None,
            Some(text) => Some(text.parse::<u32>().map_err(|_| {
                Problem::invalid(format!(
                    "scan {text:?} is not valid: give a whole number from 1 to {}",
                    errand::core::MAX_SCAN
                ))
            })?),
        },
    };
    if search.scan.is_some() && !search.has_terms() {
        return Err(Problem::invalid(
            "scan bounds a search: give it with meta=KEY=VALUE or where=payload.PATH=VALUE",
        ));
    }
    search.validate()?;
    Ok(search)
}
