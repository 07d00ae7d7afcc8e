//! One message as one owner holds it, in any strategy ([`HeldMessage`]): what an inbox's
//! export lists and its import writes ([`super::InboxTransfer`]).

use bson::{doc, Bson, Document};

use super::MessageId;
use crate::bson_ext;
use crate::error::Result;

/// Why a held message is a tombstone: it stays where it was, without its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Gone {
    /// Deleted by the owner ([`InboxLifecycle::delete`](super::InboxLifecycle::delete)).
    Deleted,
    /// Retracted by its sender ([`InboxLifecycle::retract`](super::InboxLifecycle::retract)).
    Retracted,
}

impl Gone {
    /// The name a copy's `gone` field holds.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Gone::Deleted => "deleted",
            Gone::Retracted => "retracted",
        }
    }

    pub(crate) fn from_name(name: &str) -> Self {
        if name == "retracted" {
            Gone::Retracted
        } else {
            Gone::Deleted
        }
    }
}

/// One message as one owner holds it, in any strategy: the message, and the owner's state of it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct HeldMessage {
    /// The message's id, the same in every inbox and every store.
    pub id: MessageId,
    /// Its sender.
    pub from: String,
    /// Its recipients, whole (a list a store keeps apart is put back); empty in a tombstone.
    pub to: Vec<String>,
    /// When it reached this inbox (see [`Message::sent`](super::Message::sent)).
    pub sent: bson::DateTime,
    /// The application's payload as stored; `None` in a tombstone.
    pub payload: Option<Bson>,
    /// When its sender last edited it.
    pub edited: Option<bson::DateTime>,
    /// Whether the owner read it.
    pub read: bool,
    /// Whether the owner starred it.
    pub starred: bool,
    /// Whether the owner mutes its sender (it is hidden).
    pub muted: bool,
    /// Whether the owner blocks its sender (it is hidden).
    pub blocked: bool,
    /// Why it is a tombstone, if it is one.
    pub gone: Option<Gone>,
}

impl HeldMessage {
    /// Whether the owner's pages show it.
    pub fn is_shown(&self) -> bool {
        self.gone.is_none() && !self.muted && !self.blocked
    }

    /// The message as a store keeps it before any owner state: `{id, from, to, sent, message,
    /// edited}` (no `to` in a tombstone, no `message` without a payload).
    pub(crate) fn message_document(&self) -> Document {
        let mut document = doc! { "id": self.id.0, "from": &self.from, "sent": self.sent };
        if self.gone.is_none() {
            document.insert("to", &self.to);
        }
        if let Some(payload) = &self.payload {
            document.insert("message", payload.clone());
        }
        if let Some(edited) = self.edited {
            document.insert("edited", edited);
        }
        document
    }

    /// Reads the message fields of a stored `document` (`id` under `id_field`); the owner's
    /// state is the caller's to set.
    pub(crate) fn from_document(
        collection: &str,
        document: &Document,
        id_field: &str,
    ) -> Result<Self> {
        let bad = |what: &str| {
            crate::bson_ext::corrupt(
                collection,
                document.get("_id").cloned(),
                format!("a message without {what}"),
            )
        };
        let id = document
            .get_object_id(id_field)
            .map_err(|_| bad("message id"))?;
        let to = bson_ext::strings(document, "to");
        Ok(Self {
            id: MessageId(id),
            from: document
                .get_str("from")
                .map_err(|_| bad("sender"))?
                .to_owned(),
            to,
            sent: *document.get_datetime("sent").map_err(|_| bad("sent"))?,
            payload: document.get("message").cloned(),
            edited: document.get_datetime("edited").ok().copied(),
            read: false,
            starred: false,
            muted: false,
            blocked: false,
            gone: None,
        })
    }
}
