//! Opening the database for a command: a refusal that `errand migrate`
//! fixes names the whole command to run, with the `--db` (never its
//! password) and `--schema` the user gave.

use std::sync::Arc;

use errand::{ConnectOptions, DbTarget, Error, Store};

use crate::exit::{self, Failure};

/// Where the command's database is, as the user named it.
#[derive(Debug)]
pub(crate) struct Named<'a> {
    /// `--db`.
    pub db: &'a str,
    /// `--schema` (PostgreSQL only).
    pub schema: &'a str,
    /// `--allow-public-schema`.
    pub allow_public_schema: bool,
}

/// [`errand::connect`]; a database without Errand's tables or with an
/// older schema is refused (exit 5) with the `errand migrate` command that
/// fixes it.
pub(crate) async fn connect(
    named: &Named<'_>,
    options: &ConnectOptions,
) -> Result<Arc<dyn Store>, Failure> {
    errand::connect(named.db, options)
        .await
        .map_err(|e| match e {
            Error::NotErrand(what) => Failure::Coded(
                exit::SCHEMA,
                format!(
                    "{what} has no Errand tables; add them with {}, or check the database named",
                    migrate_command(named)
                ),
            ),
            Error::SchemaOutdated(what) => Failure::Coded(
                exit::SCHEMA,
                format!(
                    "the database schema is not ready: {what}; upgrade it with {}",
                    migrate_command(named)
                ),
            ),
            other => Failure::Errand(other),
        })
}

/// `` `errand migrate --db DB [--schema S]` ``, quoted for a shell; a
/// PostgreSQL URL's password is left out, and the text says so.
fn migrate_command(named: &Named<'_>) -> String {
    match DbTarget::parse(named.db) {
        Ok(DbTarget::Postgres(url)) => {
            let (url, had_password) = without_password(&url);
            let public = if named.allow_public_schema {
                " --allow-public-schema"
            } else {
                ""
            };
            let note = if had_password {
                " (with the URL's password, left out here)"
            } else {
                ""
            };
            format!(
                "`errand migrate --db {} --schema {}{public}`{note}",
                shell_word(&url),
                shell_word(named.schema)
            )
        }
        _ => format!("`errand migrate --db {}`", shell_word(named.db)),
    }
}

/// `url` without a password, in its user part or in a `password=`
/// parameter, and whether it had one.
fn without_password(url: &str) -> (String, bool) {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[after_scheme..]
        .find('/')
        .map_or(base.len(), |i| after_scheme + i);
    let authority = &base[after_scheme..authority_end];
    let mut removed = false;
    let mut out = base[..after_scheme].to_owned();
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = match userinfo.split_once(':') {
                Some((user, _password)) => {
                    removed = true;
                    user
                }
                None => userinfo,
            };
            out.push_str(&format!("{user}@{host}"));
        }
        None => out.push_str(authority),
    }
    out.push_str(&base[authority_end..]);
    if let Some(query) = query {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|p| {
                let key = p.split('=').next().unwrap_or_default();
                let password = key.eq_ignore_ascii_case("password");
                removed |= password;
                !password
            })
            .collect();
        if !kept.is_empty() {
            out.push('?');
            out.push_str(&kept.join("&"));
        }
    }
    (out, removed)
}

/// `s` as one shell word: as it is when it is plain, single-quoted
/// otherwise.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(&b));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_left_out_of_the_url() {
        let cases = [
            (
                "postgres://u:secret@h:5432/db",
                "postgres://u@h:5432/db",
                true,
            ),
            ("postgres://u@h/db", "postgres://u@h/db", false),
            ("postgresql://h/db", "postgresql://h/db", false),
            (
                "postgres://u:p%40ss@h/db?sslmode=disable&password=x",
                "postgres://u@h/db?sslmode=disable",
                true,
            ),
            ("postgres://u@h/db?Password=x", "postgres://u@h/db", true),
            ("postgres://u@h/a@b", "postgres://u@h/a@b", false),
        ];
        for (url, shown, had) in cases {
            assert_eq!(without_password(url), (shown.to_owned(), had), "{url}");
        }
    }

    #[test]
    fn the_command_is_quoted_for_a_shell() {
        let named = |db, schema| Named {
            db,
            schema,
            allow_public_schema: false,
        };
        assert_eq!(
            migrate_command(&named("postgres://u:pw@h:5432/db?sslmode=disable", "jobs")),
            "`errand migrate --db 'postgres://u@h:5432/db?sslmode=disable' --schema jobs` (with the URL's password, left out here)"
        );
        assert_eq!(
            migrate_command(&named("my jobs.db", "errand")),
            "`errand migrate --db 'my jobs.db'`"
        );
        assert_eq!(
            migrate_command(&Named {
                allow_public_schema: true,
                ..named("postgres://h/db", "public")
            }),
            "`errand migrate --db postgres://h/db --schema public --allow-public-schema`"
        );
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
