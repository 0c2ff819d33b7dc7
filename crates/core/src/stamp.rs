//! Who did something and why: the stamp an operator's action (or a
//! person's signal) carries into the audit log, and the rules for its text.

use crate::error::{Error, Result};

/// The longest operator name.
pub const MAX_OPERATOR_BYTES: usize = 200;
/// The longest reason.
pub const MAX_REASON_BYTES: usize = 2000;

/// The rule for the text an audit entry records (an operator's name, a
/// reason): not blank, at most `max` bytes, and no control character —
/// except line breaks and tabs where `line_breaks` allows them. Every
/// caller that words its own refusal (the HTTP API names the JSON field)
/// applies this same rule.
pub fn is_audit_text(text: &str, max: usize, line_breaks: bool) -> bool {
    !text.trim().is_empty()
        && text.len() <= max
        && !text
            .chars()
            .any(|c| c.is_control() && !(line_breaks && matches!(c, '\n' | '\r' | '\t')))
}

/// Checks an operator name: 1 to 200 bytes of printable text.
pub fn check_operator(operator: &str) -> Result<()> {
    if !is_audit_text(operator, MAX_OPERATOR_BYTES, false) {
        return Err(Error::invalid(
            "the operator name must be 1 to 200 printable characters (pass --by NAME)",
        ));
    }
    Ok(())
}

/// Checks a reason: 1 to 2000 bytes; line breaks and tabs allowed, other
/// control characters not.
pub fn check_reason(reason: &str) -> Result<()> {
    if !is_audit_text(reason, MAX_REASON_BYTES, true) {
        return Err(Error::invalid(
            "the reason must be 1 to 2000 characters of text (pass --reason TEXT)",
        ));
    }
    Ok(())
}

/// Who acted and why: the stamp an operator's audit entry carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditStamp {
    /// Who asked.
    pub operator: String,
    /// Why, as the audit entry records it.
    pub reason: Option<String>,
}
