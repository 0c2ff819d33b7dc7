//! What a transfer copies: every table of the SQLite schema, column by
//! column, with how each column's value travels (the two backends store
//! times, flags and JSON differently).

/// How a column's value is stored on each side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Text on both sides.
    Text,
    /// An integer on both sides.
    Int,
    /// SQLite 0/1, PostgreSQL `boolean`.
    Bool,
    /// SQLite milliseconds since the epoch, PostgreSQL `timestamptz`.
    Time,
    /// JSON text on both sides, its text kept (PostgreSQL `json`).
    Json,
    /// JSON text in SQLite, `jsonb` (or a domain over it) in PostgreSQL.
    Jsonb,
    /// JSON text in SQLite, `text` in PostgreSQL.
    JsonText,
    /// A floating-point number on both sides.
    Real,
}

impl Kind {
    /// The type `json_to_recordset` reads the value as.
    pub(crate) fn record_type(self) -> &'static str {
        match self {
            Kind::Text | Kind::Json | Kind::Jsonb | Kind::JsonText => "text",
            Kind::Int | Kind::Time => "bigint",
            Kind::Bool => "boolean",
            Kind::Real => "double precision",
        }
    }

    /// The expression that turns the record's field `r.c` into the
    /// column's value (the rest by assignment: integers into narrower
    /// ones, text into domains).
    pub(crate) fn insert_expr(self, column: &str) -> String {
        match self {
            Kind::Time => {
                format!("'epoch'::timestamptz + r.{column} * interval '1 millisecond'")
            }
            Kind::Json => format!("r.{column}::json"),
            Kind::Jsonb => format!("r.{column}::jsonb"),
            _ => format!("r.{column}"),
        }
    }

    /// The expression a verification reads the column with from
    /// PostgreSQL: text in every case, times as epoch milliseconds.
    pub(crate) fn read_expr(self, column: &str) -> String {
        match self {
            Kind::Time => format!("(extract(epoch FROM {column}) * 1000)::bigint::text"),
            _ => format!("{column}::text"),
        }
    }
}

/// One column: its name on both sides, and what SQLite reads for it when
/// that is not the column itself.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Column {
    pub(crate) name: &'static str,
    pub(crate) source: Option<&'static str>,
    pub(crate) kind: Kind,
}

impl Column {
    /// What SQLite selects for this column.
    pub(crate) fn source_expr(&self) -> &'static str {
        self.source.unwrap_or(self.name)
    }
}

const fn c(name: &'static str, kind: Kind) -> Column {
    Column {
        name,
        source: None,
        kind,
    }
}

/// A table copied row by row, in the order of its key (the columns that
/// identify a row, which pages are read by).
#[derive(Debug)]
pub(crate) struct Table {
    pub(crate) name: &'static str,
    pub(crate) key: &'static [&'static str],
    pub(crate) columns: &'static [Column],
}

impl Table {
    /// The key's columns.
    pub(crate) fn key_columns(&self) -> Vec<&Column> {
        self.key
            .iter()
            .filter_map(|k| self.columns.iter().find(|c| c.name == *k))
            .collect()
    }
}

use Kind::{Bool, Int, Json, JsonText, Jsonb, Real, Text, Time};

/// `errand_jobs`: PostgreSQL's `seq` (the order jobs were inserted in, an
/// identity column) takes SQLite's rowid, which is the same order.
/// PostgreSQL's `awaited` (a process waits for the job to end) is left
/// false: no process waits on a database being moved.
pub(crate) const JOBS: Table = Table {
    name: "errand_jobs",
    key: &["seq"],
    columns: &[
        Column {
            name: "seq",
            source: Some("rowid"),
            kind: Int,
        },
        c("id", Text),
        c("queue", Text),
        c("kind", Text),
        c("state", Text),
        c("payload", Json),
        c("priority", Int),
        c("attempts", Int),
        c("max_attempts", Int),
        c("replays", Int),
        c("lease_expiries", Int),
        c("max_lease_expiries", Int),
        c("give_up_at", Time),
        c("available_at", Time),
        c("created_at", Time),
        c("updated_at", Time),
        c("lease_token", Text),
        c("lease_until", Time),
        c("last_error", Text),
        c("last_error_class", Text),
        c("finished_at", Time),
        c("key_name", Text),
        c("key_limit", Int),
        c("key_ordered", Bool),
        c("attempt_started_at", Time),
        c("deadline", Time),
        c("traceparent", Text),
        c("waiting_on", Int),
        c("on_dependency_failure", Text),
        c("has_dependents", Bool),
        c("output", Json),
        c("progress", Text),
        c("workflow", Text),
        c("tags", Jsonb),
        c("meta", Jsonb),
        c("unique_key", Text),
        c("batch", Text),
        c("await_signal", Text),
        c("await_until", Time),
        c("on_await_timeout", Text),
        c("signal_seq", Int),
        c("added_by", Text),
    ],
};

/// `errand_workflow_steps`, PostgreSQL's index of a workflow's steps
/// (SQLite indexes `errand_jobs.workflow` instead): written with each
/// page of jobs, from the jobs that name a workflow.
pub(crate) const STEPS: Table = Table {
    name: "errand_workflow_steps",
    key: &["workflow", "created_at", "job_id"],
    columns: &[
        c("workflow", Text),
        c("created_at", Time),
        c("job_id", Text),
    ],
};

/// Every table copied from SQLite, in the order they are copied (jobs
/// before the rows that refer to them). `errand_schema_history` is not
/// among them: the target has its own, written by its migrations.
pub(crate) const TABLES: &[Table] = &[
    JOBS,
    Table {
        name: "errand_attempts",
        key: &["seq"],
        columns: &[
            c("seq", Int),
            c("job_id", Text),
            c("cycle", Int),
            c("attempt", Int),
            c("started_at", Time),
            c("finished_at", Time),
            c("outcome", Text),
            c("error", Text),
            c("error_class", Text),
        ],
    },
    Table {
        name: "errand_dependencies",
        key: &["job_id", "depends_on"],
        columns: &[
            c("job_id", Text),
            c("depends_on", Text),
            c("position", Int),
            c("met", Bool),
        ],
    },
    Table {
        name: "errand_signals",
        key: &["seq"],
        columns: &[
            c("seq", Int),
            c("job_id", Text),
            c("name", Text),
            c("payload", Json),
            c("sent_at", Time),
            c("delivered_at", Time),
        ],
    },
    Table {
        name: "errand_job_tags",
        key: &["tag", "created_at", "job_id"],
        columns: &[c("tag", Text), c("created_at", Time), c("job_id", Text)],
    },
    Table {
        name: "errand_job_meta",
        key: &["key", "value", "created_at", "job_id"],
        columns: &[
            c("key", Text),
            c("value", Text),
            c("created_at", Time),
            c("job_id", Text),
        ],
    },
    Table {
        name: "errand_batches",
        key: &["id"],
        columns: &[
            c("id", Text),
            c("created_at", Time),
            c("sealed_at", Time),
            c("on_success", Text),
            c("on_finish", Text),
        ],
    },
    Table {
        name: "errand_audit",
        key: &["seq"],
        columns: &[
            c("seq", Int),
            c("job_id", Text),
            c("queue", Text),
            c("action", Text),
            c("operator", Text),
            c("reason", Text),
            c("at", Time),
            c("copy_id", Text),
            c("schedule", Text),
        ],
    },
    Table {
        name: "errand_paused_queues",
        key: &["queue"],
        columns: &[
            c("queue", Text),
            c("operator", Text),
            c("reason", Text),
            c("paused_at", Time),
        ],
    },
    Table {
        name: "errand_queue_limits",
        key: &["queue"],
        columns: &[
            c("queue", Text),
            c("concurrency", Int),
            c("operator", Text),
            c("reason", Text),
            c("set_at", Time),
        ],
    },
    Table {
        name: "errand_counts",
        key: &["queue", "state"],
        columns: &[
            c("queue", Text),
            c("state", Text),
            c("n", Int),
            c("counted_at", Time),
        ],
    },
    Table {
        name: "errand_rate_limits",
        key: &["name"],
        columns: &[
            c("name", Text),
            c("tokens", Real),
            c("last_granted", Int),
            c("updated_at", Time),
        ],
    },
    Table {
        name: "errand_workers",
        key: &["id"],
        columns: &[
            c("id", Text),
            c("host", Text),
            c("pid", Int),
            c("queues", Jsonb),
            c("started_at", Time),
            c("last_cycle_at", Time),
            c("metrics", Jsonb),
        ],
    },
    Table {
        name: "errand_schedules",
        key: &["name"],
        columns: &[
            c("name", Text),
            c("cron", Text),
            c("kind", Text),
            c("queue", Text),
            c("payload", JsonText),
            c("max_attempts", Int),
            c("misfire", Text),
            c("created_at", Time),
            c("updated_at", Time),
            c("active_since", Time),
            c("paused_at", Time),
            c("paused_by", Text),
            c("paused_reason", Text),
            c("tz", Text),
        ],
    },
    Table {
        name: "errand_minutes",
        key: &["queue", "minute", "series"],
        columns: &[
            c("queue", Text),
            c("minute", Int),
            c("series", Text),
            c("value", Int),
        ],
    },
];

/// The identity columns whose sequences go on after the copied values.
pub(crate) const IDENTITIES: &[(&str, &str)] = &[
    ("errand_jobs", "seq"),
    ("errand_attempts", "seq"),
    ("errand_signals", "seq"),
    ("errand_audit", "seq"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_column_is_a_column_and_names_are_unique() {
        for t in TABLES.iter().chain([&STEPS]) {
            assert_eq!(t.key_columns().len(), t.key.len(), "{}", t.name);
            let mut names: Vec<_> = t.columns.iter().map(|c| c.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), t.columns.len(), "{}", t.name);
        }
    }
}
