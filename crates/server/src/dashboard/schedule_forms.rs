//! Adding, editing and removing stored schedules from the dashboard: a
//! form (GET) with the definition — name, pattern, time zone, kind,
//! queue, payload, attempt budget, misfire policy — and the operator and
//! reason, then the change (POST), each recorded in the audit log as
//! `errand schedule add|remove` records it. A refused form comes back with
//! what was entered and what to fix, and writes nothing. The guard has
//! checked the CSRF token before these run.

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use errand::{
    Misfire, Name, Payload, ScheduleAction, ScheduleAdd, ScheduleDefinition, StoredSchedule,
};
use maud::{Markup, html};

use super::Dash;
use super::actions::audit_fields;
use super::error::PageError;
use super::forms::{Audit, Form, detail};
use super::guard::Visitor;
use super::schedules::{LIST, edit_path, path_name, remove_path};
use super::view::{self, Ctx, Section};

/// The fields of the definition form, besides the operator and reason.
const FIELDS: [&str; 8] = [
    "name",
    "cron",
    "tz",
    "kind",
    "queue",
    "payload",
    "max_attempts",
    "misfire",
];

pub(super) fn routes() -> Router<Dash> {
    Router::new()
        .route("/dashboard/schedules/new", get(new_form).post(add))
        .route(
            "/dashboard/schedules/{name}/edit",
            get(edit_form).post(edit),
        )
        .route(
            "/dashboard/schedules/{name}/remove",
            get(confirm_remove).post(remove),
        )
}

/// A definition as entered, kept to show the form again after a refusal.
#[derive(Clone, Debug)]
struct Entered {
    name: String,
    cron: String,
    tz: String,
    kind: String,
    queue: String,
    payload: String,
    max_attempts: String,
    misfire: String,
}

impl Default for Entered {
    fn default() -> Self {
        Entered {
            name: String::new(),
            cron: String::new(),
            tz: "UTC".into(),
            kind: String::new(),
            queue: errand::core::DEFAULT_QUEUE.into(),
            payload: "{}".into(),
            max_attempts: errand::core::DEFAULT_MAX_ATTEMPTS.to_string(),
            misfire: "skip".into(),
        }
    }
}

impl Entered {
    fn of(form: &Form) -> Entered {
        let first = |name| form.first(name);
        Entered {
            name: first("name"),
            cron: first("cron"),
            tz: first("tz"),
            kind: first("kind"),
            queue: first("queue"),
            payload: first("payload"),
            max_attempts: first("max_attempts"),
            misfire: first("misfire"),
        }
    }

    fn stored(s: &StoredSchedule) -> Entered {
        let d = &s.definition;
        Entered {
            name: d.name.to_string(),
            cron: d.cron.clone(),
            tz: d.tz.to_string(),
            kind: d.kind.to_string(),
            queue: d.queue.to_string(),
            payload: d.payload.as_str().to_owned(),
            max_attempts: d.max_attempts.to_string(),
            misfire: d.misfire.to_string(),
        }
    }

    /// The definition entered; the message names the field to fix.
    fn definition(&self) -> Result<ScheduleDefinition, String> {
        fn field(what: &'static str) -> impl Fn(errand::Error) -> String {
            move |e| format!("{what}: {}", detail(e))
        }
        let payload = if self.payload.trim().is_empty() {
            Payload::default()
        } else {
            Payload::from_json_text(self.payload.trim()).map_err(field("The payload"))?
        };
        let max_attempts: u32 = self.max_attempts.trim().parse().map_err(|_| {
            format!(
                "The attempt budget: {:?} is not a whole number (use 1 to 1000)",
                self.max_attempts
            )
        })?;
        let misfire: Misfire = self
            .misfire
            .trim()
            .parse()
            .map_err(field("The misfire policy"))?;
        let tz = self.tz.trim().parse().map_err(field("The time zone"))?;
        ScheduleDefinition::new(
            self.name.trim(),
            self.cron.trim(),
            self.kind.trim(),
            payload,
        )
        .and_then(|d| d.with_options(Some(self.queue.trim()), Some(max_attempts), Some(misfire)))
        .map(|d| d.in_zone(tz))
        .map_err(field("The schedule"))
    }
}

/// Adding a schedule, or editing the one named.
enum Editing<'a> {
    New,
    Stored(&'a Name),
}

fn text_field(id: &str, label: &str, value: &str, note: Option<&str>, locked: bool) -> Markup {
    html! {
        label for=(id) { (label) @if let Some(n) = note { " " span.note { (n) } } }
        input id=(id) type="text" name=(id) required value=(value) readonly[locked];
    }
}

fn form_page(
    ctx: &Ctx,
    editing: &Editing<'_>,
    entered: &Entered,
    audit: &Audit,
    problem: Option<&str>,
) -> Response {
    let (title, action, button) = match editing {
        Editing::New => (
            "Add a schedule".to_owned(),
            format!("{LIST}/new"),
            "Confirm: add",
        ),
        Editing::Stored(name) => (
            format!("Edit schedule {name}"),
            edit_path(name),
            "Confirm: replace the definition",
        ),
    };
    let locked = matches!(editing, Editing::Stored(_));
    let body = html! {
        h1 { (title) }
        @if let Some(p) = problem { (view::notice("error", p)) }
        p {
            "Every running service enqueues its job at each tick of the pattern, read in its time zone, once per tick. "
            @if locked { "A new definition starts from now: earlier ticks are not enqueued. " }
            "Your name and reason go into the audit log."
        }
        form.confirm method="post" action=(action) {
            (ctx.csrf_field())
            (text_field("name", "Name", &entered.name, Some("(part of every job id: cron:NAME:TICK)"), locked))
            (text_field("cron", "Cron pattern", &entered.cron, Some("(5 fields, or 6 with seconds first)"), false))
            (text_field("tz", "Time zone", &entered.tz, Some("(an IANA name: Europe/Berlin, America/New_York, UTC)"), false))
            (text_field("kind", "Kind", &entered.kind, None, false))
            (text_field("queue", "Queue", &entered.queue, None, false))
            label for="payload" { "Payload (JSON, at most 64 KiB)" }
            textarea #payload name="payload" rows="4" { (entered.payload) }
            (text_field("max_attempts", "Attempt budget", &entered.max_attempts, Some("(1 to 1000)"), false))
            (text_field("misfire", "Missed ticks", &entered.misfire, Some("(skip, once, or backfill:N)"), false))
            (audit_fields(audit))
            p.actions {
                button.primary type="submit" { (button) }
                " "
                a href=(LIST) { "back to the schedules" }
            }
        }
    };
    let status = view::form_status(problem);
    view::page(status, Some(ctx), &title, Some(Section::Schedules), body)
}

async fn new_form(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
) -> Result<Response, PageError> {
    let ctx = Ctx::new(&dash, &visitor);
    Ok(form_page(
        &ctx,
        &Editing::New,
        &Entered::default(),
        &Audit::default(),
        None,
    ))
}

async fn edit_form(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let name = path_name(path)?;
    let stored = dash.admin.schedule(&name).await?;
    let ctx = Ctx::new(&dash, &visitor);
    Ok(form_page(
        &ctx,
        &Editing::Stored(&name),
        &Entered::stored(&stored),
        &Audit::default(),
        None,
    ))
}

/// Stores the definition the form posted: a new schedule (`replace`
/// false: another definition under the name is refused) or a replacement
/// of the one named.
async fn store(
    dash: Dash,
    visitor: Visitor,
    form: Form,
    editing: Editing<'_>,
) -> Result<Response, PageError> {
    let mut allowed = FIELDS.to_vec();
    allowed.extend(["operator", "reason"]);
    form.only(&allowed)?;
    let mut entered = Entered::of(&form);
    if let Editing::Stored(name) = editing {
        entered.name = name.to_string();
    }
    let again = |audit: &Audit, problem: &str| {
        let ctx = Ctx::new(&dash, &visitor);
        form_page(&ctx, &editing, &entered, audit, Some(problem))
    };
    let checked = Audit::posted(&form).and_then(|audit| {
        entered
            .definition()
            .map(|d| (audit, d))
            .map_err(|p| (Audit::entered(&form), p))
    });
    let (audit, definition) = match checked {
        Ok(ok) => ok,
        // Nothing is written; the form comes back with what was entered.
        Err((audit, problem)) => return Ok(again(&audit, &problem)),
    };
    let req = ScheduleAdd {
        definition,
        replace: matches!(editing, Editing::Stored(_)),
        operator: audit.operator.clone(),
        reason: Some(audit.reason.clone()),
    };
    let added = match dash.admin.add_schedule(&req).await {
        Ok(added) => added,
        Err(e @ errand::Error::Invalid(_)) => return Ok(again(&audit, &detail(e))),
        Err(e) => return Err(e.into()),
    };
    let done = match added.outcome {
        errand::ScheduleAddOutcome::Added => "added",
        errand::ScheduleAddOutcome::Replaced => "replaced",
        errand::ScheduleAddOutcome::Unchanged => "unchanged",
    };
    Ok(Redirect::to(&format!("{LIST}?done={done}")).into_response())
}

async fn add(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
) -> Result<Response, PageError> {
    store(dash, visitor, form, Editing::New).await
}

async fn edit(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let name = path_name(path)?;
    // Editing needs a stored schedule (one removed meanwhile is not found).
    dash.admin.schedule(&name).await?;
    store(dash, visitor, form, Editing::Stored(&name)).await
}

fn remove_page(
    ctx: &Ctx,
    schedule: &StoredSchedule,
    audit: &Audit,
    problem: Option<&str>,
) -> Response {
    let name = &schedule.definition.name;
    let body = html! {
        h1 { "Remove schedule " code { (name.as_str()) } "?" }
        @if let Some(p) = problem { (view::notice("error", p)) }
        p { "No service enqueues its ticks any more; the jobs it enqueued stay and run. The audit entry records the definition removed, with your name and reason." }
        p { code { (schedule.definition.describe()) } }
        form.confirm method="post" action=(remove_path(name)) {
            (ctx.csrf_field())
            (audit_fields(audit))
            p.actions {
                button.danger type="submit" { "Confirm: remove " (name.as_str()) }
                " "
                a href=(LIST) { "back to the schedules" }
            }
        }
    };
    let status = view::form_status(problem);
    view::page(
        status,
        Some(ctx),
        "Remove schedule",
        Some(Section::Schedules),
        body,
    )
}

async fn confirm_remove(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let name = path_name(path)?;
    let stored = dash.admin.schedule(&name).await?;
    let ctx = Ctx::new(&dash, &visitor);
    Ok(remove_page(&ctx, &stored, &Audit::default(), None))
}

async fn remove(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let name = path_name(path)?;
    form.only(&["operator", "reason"])?;
    let audit = match Audit::posted(&form) {
        Ok(audit) => audit,
        Err((entered, problem)) => {
            let stored = dash.admin.schedule(&name).await?;
            let ctx = Ctx::new(&dash, &visitor);
            return Ok(remove_page(&ctx, &stored, &entered, Some(&problem)));
        }
    };
    let action = ScheduleAction {
        name,
        operator: audit.operator,
        reason: Some(audit.reason),
    };
    dash.admin.remove_schedule(&action).await?;
    Ok(Redirect::to(&format!("{LIST}?done=removed")).into_response())
}
