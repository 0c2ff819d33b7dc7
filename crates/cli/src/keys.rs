//! Encryption keys: where the command reads them (`--keys-file`, else
//! `ERRAND_ENCRYPTION_KEYS`), `errand keys generate` and `errand keys
//! rotate --to KEY`.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use errand::Admin;
use errand::encryption::{KEYS_ENV, Keyring};

use crate::exit::Failure;
use crate::output::{self, outln};
use crate::progress::Progress;

/// `errand keys …`.
#[derive(Args, Debug)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub command: KeysCommand,
}

/// The `errand keys` subcommands.
#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Print a fresh random key as ID:BASE64, for ERRAND_ENCRYPTION_KEYS or
    /// a keys file (nothing is stored).
    Generate(GenerateArgs),
    /// Re-encrypt every payload, output and signal payload under one of
    /// the given keys (clear ones too), in bounded batches, each its own
    /// transaction; stopped, it leaves every value readable, and running it
    /// again goes on. Give the new key with the old ones, so the old values
    /// can be read.
    Rotate(RotateArgs),
}

/// `errand keys generate`.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// The new key's id (1 to 32 letters, digits, `_` or `-`).
    #[arg(long, default_value = "k1")]
    pub id: String,
    /// Print `{"id": …, "key": …, "entry": "ID:BASE64"}`.
    #[arg(long)]
    pub json: bool,
}

/// `errand keys rotate`.
#[derive(Args, Debug)]
pub struct RotateArgs {
    /// The key to bring every value under (one of the keys given).
    #[arg(long)]
    pub to: String,
    /// Jobs read and rewritten per transaction (1 to 10000).
    #[arg(long, default_value_t = 500)]
    pub batch: u32,
    /// Print the result as JSON (no progress bar).
    #[arg(long)]
    pub json: bool,
}

/// The keys the command was given: `--keys-file`, else the environment
/// variable, else none.
///
/// # Errors
/// The file cannot be read, or a key is malformed (the message names
/// which, never a key's bytes).
pub(crate) fn given(keys_file: Option<&Path>) -> Result<Option<Arc<Keyring>>, Failure> {
    let keys = match keys_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::Usage(format!("cannot read the keys file {}: {e}", path.display()))
            })?;
            Keyring::from_file_text(&text)?
        }
        None => match std::env::var(KEYS_ENV) {
            Ok(list) if !list.trim().is_empty() => Keyring::parse(&list)?,
            _ => return Ok(None),
        },
    };
    Ok(Some(Arc::new(keys)))
}

/// `errand keys generate`: needs no database.
pub(crate) fn generate(args: &GenerateArgs) -> Result<ExitCode, Failure> {
    let key = Keyring::generate_key();
    let entry = format!("{}:{key}", args.id);
    // Checked as the keyring will read it (the id's form).
    Keyring::parse(&entry)?;
    if args.json {
        output::json(&serde_json::json!({"id": args.id, "key": key, "entry": entry}))?;
    } else {
        outln!("{entry}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `errand keys rotate`.
pub(crate) async fn run(
    admin: &Admin,
    keys: Option<Arc<Keyring>>,
    args: KeysArgs,
) -> Result<ExitCode, Failure> {
    match args.command {
        KeysCommand::Generate(a) => generate(&a),
        KeysCommand::Rotate(a) => rotate(admin, keys, &a).await,
    }
}

async fn rotate(
    admin: &Admin,
    keys: Option<Arc<Keyring>>,
    args: &RotateArgs,
) -> Result<ExitCode, Failure> {
    let Some(keys) = keys else {
        return Err(Failure::Usage(format!(
            "no keys are given: set {KEYS_ENV} (k1:BASE64,k2:BASE64) or pass --keys-file, with \
             `{}` among them",
            args.to
        )));
    };
    let keys = Keyring::clone(&keys).encrypting_with(&args.to)?;
    // The bar's length is a whole count: made only when a bar is drawn.
    let bar = if crate::progress::shown(args.json) {
        let total: u64 = admin.count_exactly().await?.iter().map(|c| c.n).sum();
        Progress::bar(
            args.json,
            total,
            format!("re-encrypting under {}", keys.current()),
        )
    } else {
        Progress::none()
    };
    let done = admin
        .rotate_keys(&keys, args.batch, |so_far| bar.set(so_far.jobs))
        .await?;
    bar.finish();
    if args.json {
        output::json(&done)?;
    } else {
        outln!(
            "{} jobs read: {} values rewritten under {}, {} already under it, {} unreadable \
             (under a key not given), {} changed meanwhile",
            done.jobs,
            done.rewritten,
            done.key,
            done.already,
            done.unreadable,
            done.changed
        );
        if done.changed > 0 {
            outln!("run it again to rewrite the values that changed meanwhile");
        }
    }
    if done.unreadable > 0 {
        // Not done: say so to scripts too.
        return Err(Failure::Coded(
            crate::exit::RUNTIME,
            format!(
                "{} values are under keys not given (or do not decrypt): give those keys too \
                 and rotate again; `errand show ID` names a value's key",
                done.unreadable
            ),
        ));
    }
    Ok(ExitCode::SUCCESS)
}
