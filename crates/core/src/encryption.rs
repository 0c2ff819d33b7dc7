//! Encryption at rest of what an application hands Errand: payloads,
//! outputs and signal payloads. Ids, kinds, queues, tags and metadata stay
//! in the clear, so that jobs can still be routed, listed and searched.
//!
//! A [`Keyring`] holds one or more named 256-bit keys; the first one
//! encrypts, every one of them decrypts, so keys rotate by putting a new
//! key first and re-encrypting (`errand keys rotate`). A value is sealed
//! with XChaCha20-Poly1305 under a random 192-bit nonce, with the job's id
//! and the field (payload, output, signal) bound as associated data: a
//! ciphertext copied into another job, or from a payload into an output,
//! does not open.
//!
//! A sealed value is stored where the clear JSON would be, as a JSON object
//! that names its key:
//! `{"errand_encrypted":{"key":"k1","data":"<base64 of nonce and ciphertext>"}}`.
//! A reader without that key sees the object (and shows "encrypted (key
//! k1)"), never bytes it cannot interpret.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chacha20poly1305::aead::{Aead, KeyInit, Payload as Aad};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore as _;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ids::JobId;
use crate::job::Job;
use crate::new_job::NewJob;
use crate::payload::Payload;
use crate::signal::{NewSignal, ReceivedSignal};

/// The environment variable the `errand` command reads its keys from:
/// `k1:BASE64,k2:BASE64`, the first one encrypting.
pub const KEYS_ENV: &str = "ERRAND_ENCRYPTION_KEYS";

/// The longest key id accepted.
pub const MAX_KEY_ID_BYTES: usize = 32;

/// The bytes of a key (256 bits).
const KEY_BYTES: usize = 32;
/// The bytes of a nonce (XChaCha20: 192 bits, safe to draw at random).
const NONCE_BYTES: usize = 24;
/// How a sealed value's text begins (the envelope is written by
/// [`Keyring::seal`] in exactly this form).
const ENVELOPE_START: &str = "{\"errand_encrypted\":";

/// Which of a job's values a ciphertext belongs to (bound into it, so a
/// ciphertext moved to another field does not open).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The payload the job was enqueued with.
    Payload,
    /// The output it completed with.
    Output,
    /// The payload of a signal sent to it.
    Signal,
}

impl Field {
    fn as_str(self) -> &'static str {
        match self {
            Field::Payload => "payload",
            Field::Output => "output",
            Field::Signal => "signal",
        }
    }
}

/// A value as a store holds it, read for re-encryption.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredValue {
    /// The job it belongs to.
    pub job: JobId,
    /// Which of the job's values it is.
    pub field: Field,
    /// For a signal's payload, the signal's number.
    pub signal_seq: Option<i64>,
    /// The text stored.
    pub value: Payload,
}

/// A stored value to replace: with `value`, where it still holds
/// `was.value` (a value changed meanwhile is left alone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewrite {
    /// The value as read.
    pub was: StoredValue,
    /// What replaces it.
    pub value: Payload,
}

/// One page of stored values: those of the jobs after a given id, in id
/// order, and the last job read (`None`: no job was left to read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValuePage {
    /// Every payload, output and signal payload of the page's jobs.
    pub values: Vec<StoredValue>,
    /// The last job of the page; the next page starts after it.
    pub last: Option<JobId>,
    /// How many jobs the page read.
    pub jobs: u64,
}

/// One named key.
#[derive(Clone)]
struct Key {
    id: String,
    cipher: XChaCha20Poly1305,
}

/// The keys a process encrypts and decrypts with: the first encrypts.
///
/// Its `Debug` form names the keys, never their bytes.
#[derive(Clone)]
pub struct Keyring {
    keys: Vec<Key>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("keys", &self.ids())
            .finish()
    }
}

/// The stored form of a sealed value.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    errand_encrypted: Sealed,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed {
    key: String,
    data: String,
}

/// Why a stored value could not be opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unopened {
    /// It was sealed with a key this process does not hold.
    MissingKey(String),
    /// It names a key this process holds, but does not open with it: it
    /// was changed, moved from another job or field, or sealed with
    /// another key under the same id.
    Damaged(String),
}

impl fmt::Display for Unopened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unopened::MissingKey(key) => write!(
                f,
                "it is encrypted with key `{key}`, which this process does not hold: give it \
                 the key in {KEYS_ENV} or --keys-file"
            ),
            Unopened::Damaged(key) => write!(
                f,
                "it is encrypted with key `{key}` but does not decrypt with it: the stored \
                 value was changed or copied from another job, or `{key}` names another key here"
            ),
        }
    }
}

impl Keyring {
    /// Reads `k1:BASE64,k2:BASE64` (the form of [`KEYS_ENV`]); each key is
    /// 32 bytes in standard base64, the first one encrypts.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the entry that is wrong (never the key's
    /// bytes).
    pub fn parse(list: &str) -> Result<Keyring> {
        Self::from_entries(
            list.split(',').map(str::trim).filter(|e| !e.is_empty()),
            KEYS_ENV,
        )
    }

    /// Reads a keys file: one `ID:BASE64` a line, the first one encrypting;
    /// blank lines and lines starting with `#` are skipped.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the line that is wrong.
    pub fn from_file_text(text: &str) -> Result<Keyring> {
        Self::from_entries(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#')),
            "the keys file",
        )
    }

    fn from_entries<'a>(entries: impl Iterator<Item = &'a str>, source: &str) -> Result<Keyring> {
        let mut keys: Vec<Key> = Vec::new();
        for (n, entry) in entries.enumerate() {
            let key = parse_entry(entry.trim()).map_err(|why| {
                Error::invalid(format!(
                    "key {} of {source} is not ID:BASE64 with a 32-byte key: {why}",
                    n + 1
                ))
            })?;
            if keys.iter().any(|k| k.id == key.id) {
                return Err(Error::invalid(format!(
                    "{source} names key `{}` twice; give each key its own id",
                    key.id
                )));
            }
            keys.push(key);
        }
        if keys.is_empty() {
            return Err(Error::invalid(format!(
                "{source} holds no key; give at least one as ID:BASE64 (errand keys generate \
                 prints a fresh one)"
            )));
        }
        Ok(Keyring { keys })
    }

    /// A fresh random key in the form the keyring reads (`BASE64`, 32 bytes).
    pub fn generate_key() -> String {
        let mut bytes = [0u8; KEY_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        BASE64.encode(bytes)
    }

    /// The key ids, the encrypting one first.
    pub fn ids(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.id.as_str()).collect()
    }

    /// The id of the key that encrypts.
    pub fn current(&self) -> &str {
        self.keys.first().map_or("", |k| k.id.as_str())
    }

    /// Whether the keyring holds a key named `id`.
    pub fn holds(&self, id: &str) -> bool {
        self.keys.iter().any(|k| k.id == id)
    }

    /// The same keys with `id` first (encrypting).
    ///
    /// # Errors
    /// [`Error::Invalid`] when the keyring holds no key `id`.
    pub fn encrypting_with(mut self, id: &str) -> Result<Keyring> {
        let at = self.keys.iter().position(|k| k.id == id).ok_or_else(|| {
            Error::invalid(format!(
                "no key `{id}` is given (the keys are {}); add it to {KEYS_ENV} or the keys file",
                self.ids().join(", ")
            ))
        })?;
        let key = self.keys.remove(at);
        self.keys.insert(0, key);
        Ok(self)
    }

    /// `clear` sealed with the encrypting key for `field` of job `job`;
    /// a value already sealed is returned as it is.
    ///
    /// # Errors
    /// [`Error::Invalid`] if the cipher refuses (it does not for any
    /// input a payload can hold).
    pub fn seal(&self, field: Field, job: &JobId, clear: &Payload) -> Result<Payload> {
        if sealed_key(clear.as_str()).is_some() {
            return Ok(clear.clone());
        }
        let key = self
            .keys
            .first()
            .ok_or_else(|| Error::invalid("the keyring holds no key"))?;
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rng().fill_bytes(&mut nonce);
        let aad = associated(field, job);
        let sealed = key
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Aad {
                    msg: clear.as_str().as_bytes(),
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| Error::invalid(format!("the {} cannot be encrypted", field.as_str())))?;
        let mut data = Vec::with_capacity(NONCE_BYTES + sealed.len());
        data.extend_from_slice(&nonce);
        data.extend_from_slice(&sealed);
        let envelope = Envelope {
            errand_encrypted: Sealed {
                key: key.id.clone(),
                data: BASE64.encode(data),
            },
        };
        let text = serde_json::to_string(&envelope)
            .map_err(|e| Error::invalid(format!("the envelope cannot be written: {e}")))?;
        Ok(Payload::from_stored(text))
    }

    /// `stored` opened: the clear value when it was sealed (for `field` of
    /// job `job`), or as it is when it was not.
    ///
    /// # Errors
    /// Why a sealed value does not open.
    pub fn open(
        &self,
        field: Field,
        job: &JobId,
        stored: &Payload,
    ) -> std::result::Result<Payload, Unopened> {
        let Some(envelope) = envelope(stored.as_str()) else {
            return Ok(stored.clone());
        };
        let sealed = envelope.errand_encrypted;
        let Some(key) = self.keys.iter().find(|k| k.id == sealed.key) else {
            return Err(Unopened::MissingKey(sealed.key));
        };
        let damaged = || Unopened::Damaged(sealed.key.clone());
        let data = BASE64
            .decode(sealed.data.as_bytes())
            .map_err(|_| damaged())?;
        if data.len() < NONCE_BYTES {
            return Err(damaged());
        }
        let (nonce, ciphertext) = data.split_at(NONCE_BYTES);
        let aad = associated(field, job);
        let clear = key
            .cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Aad {
                    msg: ciphertext,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| damaged())?;
        let text = String::from_utf8(clear).map_err(|_| damaged())?;
        Ok(Payload::from_stored(text))
    }
}

/// Opens `stored` with `keys`; without a keyring, a sealed value does not
/// open ([`Unopened::MissingKey`]) and a clear one is returned as it is.
///
/// # Errors
/// Why a sealed value does not open.
pub fn open_value(
    keys: Option<&Keyring>,
    field: Field,
    job: &JobId,
    stored: &Payload,
) -> std::result::Result<Payload, Unopened> {
    match keys {
        Some(keys) => keys.open(field, job, stored),
        None => match sealed_key(stored.as_str()) {
            Some(key) => Err(Unopened::MissingKey(key)),
            None => Ok(stored.clone()),
        },
    }
}

/// Opens `value` where it lies (a clear value is left alone, without a
/// copy).
///
/// # Errors
/// Why a sealed value does not open; it is then left as stored.
pub fn open_in_place(
    keys: Option<&Keyring>,
    field: Field,
    job: &JobId,
    value: &mut Payload,
) -> std::result::Result<(), Unopened> {
    if !value.as_str().starts_with(ENVELOPE_START) {
        return Ok(());
    }
    *value = open_value(keys, field, job, value)?;
    Ok(())
}

/// Opens the payload of the signal job `job` received, if it carries one.
///
/// # Errors
/// [`Error::Invalid`] saying why the payload does not open.
pub fn open_signal(
    keys: Option<&Keyring>,
    job: &JobId,
    signal: &mut Option<ReceivedSignal>,
) -> Result<()> {
    if let Some(payload) = signal.as_mut().and_then(|s| s.payload.as_mut()) {
        open_in_place(keys, Field::Signal, job, payload).map_err(|why| {
            Error::invalid(format!(
                "the payload of the signal to job `{job}` cannot be read: {why}"
            ))
        })?;
    }
    Ok(())
}

/// Seals the payloads of jobs about to be stored (nothing without a
/// keyring); a job without an id is given one here, since its ciphertext
/// is bound to it.
///
/// # Errors
/// See [`Keyring::seal`].
pub fn seal_new_jobs(keys: Option<&Keyring>, jobs: &mut [NewJob]) -> Result<()> {
    if let Some(keys) = keys {
        for job in jobs {
            let id = job.id.get_or_insert_with(JobId::generate);
            job.payload = keys.seal(Field::Payload, id, &job.payload)?;
        }
    }
    Ok(())
}

/// A signal about to be stored, its payload sealed when there is a
/// keyring.
///
/// # Errors
/// See [`Keyring::seal`].
pub fn seal_signal<'a>(
    keys: Option<&Keyring>,
    signal: &'a NewSignal,
) -> Result<std::borrow::Cow<'a, NewSignal>> {
    match (keys, &signal.payload) {
        (Some(keys), Some(payload)) => {
            let mut sealed = signal.clone();
            sealed.payload = Some(keys.seal(Field::Signal, &signal.job, payload)?);
            Ok(std::borrow::Cow::Owned(sealed))
        }
        _ => Ok(std::borrow::Cow::Borrowed(signal)),
    }
}

/// The output a job completes with, sealed when there is a keyring.
///
/// # Errors
/// See [`Keyring::seal`].
pub fn seal_output<'a>(
    keys: Option<&Keyring>,
    job: &JobId,
    output: Option<&'a Payload>,
) -> Result<Option<std::borrow::Cow<'a, Payload>>> {
    match (keys, output) {
        (Some(keys), Some(output)) => Ok(Some(std::borrow::Cow::Owned(keys.seal(
            Field::Output,
            job,
            output,
        )?))),
        (None, Some(output)) => Ok(Some(std::borrow::Cow::Borrowed(output))),
        (_, None) => Ok(None),
    }
}

/// Jobs about to be stored, their payloads sealed when there is a keyring
/// (borrowed as they are otherwise).
///
/// # Errors
/// See [`Keyring::seal`].
pub fn sealed_jobs<'a>(
    keys: Option<&Keyring>,
    jobs: &'a [NewJob],
) -> Result<std::borrow::Cow<'a, [NewJob]>> {
    if keys.is_none() {
        return Ok(std::borrow::Cow::Borrowed(jobs));
    }
    let mut owned = jobs.to_vec();
    seal_new_jobs(keys, &mut owned)?;
    Ok(std::borrow::Cow::Owned(owned))
}

/// Opens a job's payload and output where `keys` can; a value that does
/// not open stays as stored (a reader shows whose key it needs).
pub fn open_job(keys: Option<&Keyring>, job: &mut Job) {
    // A value that does not open stays as stored, naming its key.
    let _ = open_in_place(keys, Field::Payload, &job.id, &mut job.payload);
    if let Some(output) = job.output.as_mut() {
        let _ = open_in_place(keys, Field::Output, &job.id, output);
    }
}

/// The id of the key `text` is sealed with, if it is a sealed value.
pub fn sealed_key(text: &str) -> Option<String> {
    envelope(text).map(|e| e.errand_encrypted.key)
}

/// The envelope `text` is, if it is one.
fn envelope(text: &str) -> Option<Envelope> {
    if !text.starts_with(ENVELOPE_START) {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// The associated data bound into a value's ciphertext.
fn associated(field: Field, job: &JobId) -> String {
    format!("errand/v1/{}/{}", field.as_str(), job.as_str())
}

/// `ID:BASE64`, checked.
fn parse_entry(entry: &str) -> std::result::Result<Key, String> {
    let (id, key) = entry
        .split_once(':')
        .ok_or_else(|| "there is no `:` between the id and the key".to_owned())?;
    let id = id.trim();
    let id_ok = !id.is_empty()
        && id.len() <= MAX_KEY_ID_BYTES
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !id_ok {
        return Err(format!(
            "the id must be 1 to {MAX_KEY_ID_BYTES} letters, digits, `_` or `-`"
        ));
    }
    let bytes = BASE64
        .decode(key.trim().as_bytes())
        .map_err(|_| format!("the key of `{id}` is not standard base64"))?;
    if bytes.len() != KEY_BYTES {
        return Err(format!(
            "the key of `{id}` is {} bytes, not {KEY_BYTES}",
            bytes.len()
        ));
    }
    let cipher = XChaCha20Poly1305::new_from_slice(&bytes)
        .map_err(|_| format!("the key of `{id}` is not {KEY_BYTES} bytes"))?;
    Ok(Key {
        id: id.to_owned(),
        cipher,
    })
}

impl Payload {
    /// The id of the key this value is encrypted with, when it is stored
    /// encrypted (and was not opened): readers show "encrypted (key ID)".
    pub fn encrypted_with(&self) -> Option<String> {
        sealed_key(self.as_str())
    }

    /// What a reader shows a person: the JSON text, or, for a value left
    /// encrypted, `encrypted (key ID)`.
    pub fn shown(&self) -> std::borrow::Cow<'_, str> {
        match self.encrypted_with() {
            Some(key) => std::borrow::Cow::Owned(format!("encrypted (key {key})")),
            None => std::borrow::Cow::Borrowed(self.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(spec: &str) -> Keyring {
        Keyring::parse(spec).expect("keys")
    }

    fn two_keys() -> (String, Keyring) {
        let (a, b) = (Keyring::generate_key(), Keyring::generate_key());
        (a.clone(), ring(&format!("k1:{a},k2:{b}")))
    }

    fn job(id: &str) -> JobId {
        JobId::new(id).expect("id")
    }

    fn payload(text: &str) -> Payload {
        Payload::from_json_text(text).expect("payload")
    }

    #[test]
    fn a_sealed_payload_opens_with_its_job_and_field_only() {
        let (_, keys) = two_keys();
        let clear = payload(r#"{"card":"4242","amount":12}"#);
        let sealed = keys.seal(Field::Payload, &job("j1"), &clear).expect("seal");
        assert!(!sealed.as_str().contains("4242"), "{}", sealed.as_str());
        assert_eq!(sealed.encrypted_with().as_deref(), Some("k1"));
        assert_eq!(keys.open(Field::Payload, &job("j1"), &sealed), Ok(clear));
        assert_eq!(
            keys.open(Field::Payload, &job("j2"), &sealed),
            Err(Unopened::Damaged("k1".into()))
        );
        assert_eq!(
            keys.open(Field::Output, &job("j1"), &sealed),
            Err(Unopened::Damaged("k1".into()))
        );
    }

    #[test]
    fn each_seal_draws_a_new_nonce() {
        let (_, keys) = two_keys();
        let clear = payload("42");
        let a = keys.seal(Field::Payload, &job("j"), &clear).expect("a");
        let b = keys.seal(Field::Payload, &job("j"), &clear).expect("b");
        assert_ne!(a, b);
    }

    #[test]
    fn a_changed_ciphertext_does_not_open() {
        let (_, keys) = two_keys();
        let sealed = keys
            .seal(Field::Signal, &job("j"), &payload("\"hello\""))
            .expect("seal");
        let mut env: serde_json::Value = serde_json::from_str(sealed.as_str()).expect("json");
        let data = env["errand_encrypted"]["data"].as_str().expect("data");
        let mut bytes = BASE64.decode(data).expect("b64");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        env["errand_encrypted"]["data"] = BASE64.encode(bytes).into();
        let changed = Payload::from_stored(env.to_string());
        assert_eq!(
            keys.open(Field::Signal, &job("j"), &changed),
            Err(Unopened::Damaged("k1".into()))
        );
    }

    #[test]
    fn the_first_key_encrypts_and_every_key_decrypts() {
        let (a, keys) = two_keys();
        let sealed = keys
            .seal(Field::Payload, &job("j"), &payload("1"))
            .expect("seal");
        let rotated = keys.encrypting_with("k2").expect("k2");
        assert_eq!(rotated.current(), "k2");
        assert_eq!(rotated.ids(), vec!["k2", "k1"]);
        assert_eq!(
            rotated.open(Field::Payload, &job("j"), &sealed),
            Ok(payload("1"))
        );
        let resealed = rotated
            .seal(Field::Payload, &job("j"), &payload("1"))
            .expect("seal");
        assert_eq!(resealed.encrypted_with().as_deref(), Some("k2"));
        let only_first = ring(&format!("k1:{a}"));
        assert_eq!(
            only_first.open(Field::Payload, &job("j"), &resealed),
            Err(Unopened::MissingKey("k2".into()))
        );
        assert!(ring(&format!("k1:{a}")).encrypting_with("k9").is_err());
    }

    #[test]
    fn clear_values_pass_and_sealed_ones_are_not_sealed_twice() {
        let (_, keys) = two_keys();
        let clear = payload(r#"{"a":1}"#);
        assert_eq!(
            keys.open(Field::Payload, &job("j"), &clear),
            Ok(clear.clone())
        );
        assert_eq!(
            open_value(None, Field::Payload, &job("j"), &clear),
            Ok(clear.clone())
        );
        let sealed = keys.seal(Field::Payload, &job("j"), &clear).expect("seal");
        assert_eq!(
            keys.seal(Field::Payload, &job("j"), &sealed)
                .expect("again"),
            sealed
        );
        assert_eq!(
            open_value(None, Field::Payload, &job("j"), &sealed),
            Err(Unopened::MissingKey("k1".into()))
        );
    }

    #[test]
    fn bad_key_lists_are_refused_with_the_entry_named() {
        let good = Keyring::generate_key();
        for (spec, says) in [
            ("", "holds no key"),
            ("k1", "no `:`"),
            ("k1:not base64!", "not standard base64"),
            ("k1:AAAA", "is 3 bytes, not 32"),
            ("bad id:AAAA", "letters, digits"),
            (&format!("k1:{good},k1:{good}"), "twice"),
        ] {
            let err = Keyring::parse(spec).expect_err(spec).to_string();
            assert!(err.contains(says), "{spec}: {err}");
            assert!(!err.contains(&good), "a key's bytes leak into: {err}");
        }
        let file = format!("# current\nk2:{good}\n\nk1:{good}\n");
        assert_eq!(
            Keyring::from_file_text(&file).expect("file").ids(),
            vec!["k2", "k1"]
        );
        assert!(!format!("{:?}", ring(&format!("k1:{good}"))).contains(&good));
    }
}
