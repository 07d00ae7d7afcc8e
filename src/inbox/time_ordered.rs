//! Reading an inbox whose documents each hold one message, ordered by `(sent, id)`: shared by
//! [`super::FanOutOnRead`] and [`super::FanOutOnWrite`].

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::Collection;

use super::recipient_lists::RecipientLists;
use super::{cursor, validate, Message, Payload, Strategy};
use crate::{Page, PageRequest, Result};

/// Where a strategy keeps the owner and the message id in its documents.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    /// The strategy whose documents these are, named in its cursors.
    pub(super) strategy: Strategy,
    /// Field matched against the inbox owner (`to` or `recipient`).
    pub(super) owner_field: &'static str,
    /// Field holding the message id (`_id` or `id`).
    pub(super) id_field: &'static str,
}

impl Layout {
    /// The index behind every page read: owner, then send time, ties broken by id. Pages walk it
    /// backwards (newest first); ascending keys keep the shard key a prefix of the index.
    pub(super) fn index_keys(&self) -> Document {
        doc! { self.owner_field: 1, "sent": 1, self.id_field: 1 }
    }

    fn sort(&self) -> Document {
        doc! { "sent": -1, self.id_field: -1 }
    }
}

/// One page, in one `find` command: the index range after the cursor, `limit + 1` documents to
/// learn whether another page follows; and where copies share their recipient list
/// (`recipients`), one more `find` for those lists.
pub(super) async fn read_page<P: Payload>(
    collection: &Collection<Document>,
    layout: Layout,
    owner: &str,
    page: PageRequest,
    recipients: Option<&RecipientLists>,
) -> Result<Page<Message<P>>> {
    validate::check_page(owner, &page)?;
    let mut filter = doc! { layout.owner_field: owner };
    if let Some(after) = &page.after {
        filter.extend(cursor::older_than(after, layout.strategy, layout.id_field)?);
    }
    let fetch = page.fetch();
    let mut documents: Vec<Document> = collection
        .find(filter)
        .sort(layout.sort())
        .limit(fetch as i64)
        .batch_size(fetch as u32)
        .await?
        .try_collect()
        .await?;
    let more = documents.len() > page.limit;
    documents.truncate(page.limit);
    if let Some(recipients) = recipients {
        recipients.restore(&mut documents, layout.id_field).await?;
    }
    let items = documents
        .into_iter()
        .map(|document| decode(collection.name(), document, layout))
        .collect::<Result<Vec<Message<P>>>>()?;
    let next = match items.last() {
        Some(last) if more => Some(cursor::after_time(layout.strategy, last.sent, last.id)),
        _ => None,
    };
    Ok(Page { items, next })
}

/// How many messages `owner` has: a counted index range.
pub(super) async fn count(
    collection: &Collection<Document>,
    layout: Layout,
    owner: &str,
) -> Result<u64> {
    validate::check_user_id("owner", owner)?;
    Ok(collection
        .count_documents(doc! { layout.owner_field: owner })
        .await?)
}

/// A message read from `collection`.
fn decode<P: Payload>(
    collection: &str,
    mut document: Document,
    layout: Layout,
) -> Result<Message<P>> {
    let stored_id = document.get("_id").cloned();
    if layout.id_field != "id" {
        if let Some(id) = document.remove(layout.id_field) {
            document.insert("id", id);
        }
    }
    crate::bson_ext::decode_with_id(collection, stored_id, document)
}
