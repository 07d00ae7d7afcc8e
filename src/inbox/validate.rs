//! Input checks shared by every strategy, run before anything is written.

use crate::error::Invalid;
use std::collections::HashSet;

use serde::Serialize;

use super::NewMessage;
use crate::{Error, Result};

/// Checks sender and recipients: a sender, at least one recipient, none empty, none repeated.
pub(super) fn check_new_message<P>(message: &NewMessage<P>) -> Result<()> {
    check_user_id("sender", &message.from)?;
    check_recipients(&message.to)
}

/// Checks recipients: at least one, none empty, none repeated.
pub(super) fn check_recipients(recipients: &[String]) -> Result<()> {
    if recipients.is_empty() {
        return Err(Error::InvalidInput {
            reason: Invalid::NoRecipients,
        });
    }
    let mut seen = HashSet::with_capacity(recipients.len());
    for recipient in recipients {
        check_user_id("recipient", recipient)?;
        if !seen.insert(recipient.as_str()) {
            return Err(Error::InvalidInput {
                reason: Invalid::DuplicateRecipient {
                    recipient: recipient.clone(),
                },
            });
        }
    }
    Ok(())
}

/// Fails with [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank user id and
/// [`Invalid::TooLong`](crate::error::Invalid::TooLong) for one over
/// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES), naming its role (the crate's one rule).
pub(super) fn check_user_id(what: &'static str, id: &str) -> Result<()> {
    crate::validate::user_id(what, id)
}

/// Fails with [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (`"message"`) when `value`
/// (a message as stored, or its payload alone) encodes to more than `limit` bytes; the crate's
/// one size check ([`crate::validate::encoded_size`]).
pub(super) fn check_message_size(value: &(impl Serialize + ?Sized), limit: usize) -> Result<usize> {
    crate::validate::encoded_size("message", value, limit)
}
