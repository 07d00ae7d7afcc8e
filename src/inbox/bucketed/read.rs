//! Reading an inbox of buckets: pages by position.

use super::*;

impl Buckets {
    /// One page of `owner`'s inbox: one `find` of the buckets holding it, skipping the entries
    /// pages do not show (tombstones, muted and blocked senders' messages); where those leave
    /// the page short, one more `find` of twice as many older buckets, and so on.
    pub(super) async fn page<P: Payload>(
        &self,
        owner: &str,
        page: PageRequest,
    ) -> Result<Page<Message<P>>> {
        let size = self.bucket_size as u64;
        // Entries at or past this position were on earlier pages.
        let mut before = match &page.after {
            Some(after) => Some(cursor::position(after, owner)?),
            None => None,
        };
        let mut wanted = self.buckets_for(page.limit);
        let mut entries = Vec::with_capacity(page.limit);
        let mut last_position = None;
        'reads: loop {
            let newest = before.map(|before| ((before - 1) / size) as i64);
            let buckets: Vec<Document> = self
                .buckets
                .find(owner_buckets(owner, 0, newest))
                .sort(doc! { "_id": -1 })
                .projection(doc! { "_id": 0, "sequence": 1, "messages": 1 })
                .limit(wanted as i64)
                .batch_size(wanted as u32)
                .await?
                .try_collect()
                .await?;
            let exhausted = buckets.len() < wanted;
            let mut oldest = None;
            for mut bucket in buckets {
                let sequence = integer(&bucket, "sequence").unwrap_or(0) as u64;
                oldest = Some(sequence);
                let Some(Bson::Array(messages)) = bucket.remove("messages") else {
                    continue;
                };
                for (index, entry) in messages.into_iter().enumerate().rev() {
                    let position = sequence * size + index as u64;
                    if before.is_some_and(|before| position >= before) {
                        continue;
                    }
                    let Bson::Document(entry) = entry else {
                        continue;
                    };
                    if !lifecycle::shown(&entry) {
                        continue;
                    }
                    entries.push(entry);
                    last_position = Some(position);
                    if entries.len() == page.limit {
                        break 'reads;
                    }
                }
            }
            match oldest {
                Some(oldest) if !exhausted && oldest > 0 => {
                    before = Some(oldest * size);
                    wanted *= 2;
                }
                _ => break,
            }
        }
        self.recipients.restore(&mut entries, "id").await?;
        let full = entries.len() == page.limit;
        let items = entries
            .into_iter()
            .map(|entry| {
                let id = entry.get("id").cloned();
                crate::bson_ext::decode_with_id(self.buckets.name(), id, entry)
            })
            .collect::<Result<Vec<Message<P>>>>()?;
        let next = match last_position {
            Some(position) if full && position > 0 => Some(cursor::after_position(owner, position)),
            _ => None,
        };
        Ok(Page { items, next })
    }
}
