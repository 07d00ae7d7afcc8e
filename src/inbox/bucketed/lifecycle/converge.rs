//! Lifecycle writes as rounds: read the buckets concerned, compute each one's change, send them
//! all guarded by revision.

use super::*;

impl Buckets {
    /// The buckets `filter` selects, read as `read` says: one `find`.
    pub(super) async fn read_buckets(&self, filter: &Document, read: Read) -> Result<Vec<Bucket>> {
        let found: Vec<Document> = self
            .buckets
            .find(filter.clone())
            .projection(read.projection())
            .batch_size(1000)
            .await?
            .try_collect()
            .await?;
        Ok(found.into_iter().map(Bucket::parse).collect())
    }

    /// Runs `write` in rounds until every change it computes has landed (see the module docs):
    /// one `find` and one `update` per round, usually one round.
    pub(super) async fn converge(&self, write: &Write<'_>) -> Result<()> {
        for _ in 0..MAX_ROUNDS {
            // A read: retried freely.
            let buckets = self
                .backend
                .retry("read buckets", || {
                    self.read_buckets(&write.filter, write.read)
                })
                .await?;
            (write.check)(&buckets)?;
            let mut batch = self.backend.update_batch(self.buckets.name());
            let mut planned = 0_u64;
            for bucket in &buckets {
                let mut change = Change::default();
                for seen in &bucket.entries {
                    if (write.select)(bucket, seen) {
                        change.apply(&write.op, seen);
                    }
                }
                if !change.is_empty() {
                    let (filter, update) = change.statement(bucket);
                    batch.push(filter, update, false)?;
                    planned += 1;
                }
            }
            if planned == 0 {
                return Ok(());
            }
            // Each statement is guarded by its bucket's revision: resent after a lost reply, it
            // matches nothing, and the next round finds its change made.
            let outcome = batch.run().await?;
            if outcome.matched >= planned && outcome.unknown.is_empty() {
                return Ok(());
            }
        }
        Err(Error::contention("bucketed lifecycle", MAX_ROUNDS))
    }

    /// Runs `write` on `owner`'s buckets, holding `owner`'s lock where updates are not atomic.
    pub(super) async fn converge_owner(&self, owner: &str, write: &Write<'_>) -> Result<()> {
        self.backend
            .exclusive_one(owner, self.converge(write))
            .await
    }

    /// Applies `op` to every entry of message `id` in its recipients' buckets, found through
    /// its record: each recipient's buckets from the one the record says its entry went to or
    /// after, read as `read` and failed by `check` before anything is written. Holds the
    /// recipients' locks where updates are not atomic, a round of them at a time. Unknown (no
    /// record, or no entry) is [`Error::NotFound`].
    pub(super) async fn converge_message(
        &self,
        id: MessageId,
        read: Read,
        check: &(dyn Fn(&[Bucket]) -> Result<()> + Send + Sync),
        op: Op,
    ) -> Result<()> {
        let record = self
            .backend
            .command("read message record", || {
                self.recipients
                    .collection()
                    .find_one(doc! { "_id": id.0 })
                    .projection(doc! { PLACED: 1 })
            })
            .await?
            .ok_or_else(|| message_not_found(id))?;
        let mut recipients: Vec<(String, i64)> = record
            .get_document(PLACED)
            .map(|placed| {
                placed
                    .keys()
                    .filter_map(|hex| Some((owner_from_hex(hex)?, integer(placed, hex)?)))
                    .collect()
            })
            .unwrap_or_default();
        if recipients.is_empty() {
            return Err(message_not_found(id));
        }
        recipients.sort();
        let owners: Vec<String> = recipients.iter().map(|(owner, _)| owner.clone()).collect();
        let first: std::collections::HashMap<&str, i64> = recipients
            .iter()
            .map(|(owner, first)| (owner.as_str(), *first))
            .collect();
        let (first, found_any) = (&first, &std::sync::atomic::AtomicBool::new(false));
        let select = move |_: &Bucket, seen: &Seen| seen.is(id);
        let (select, op) = (&select, &op);
        self.backend
            .exclusive_in_rounds(&owners, |taken| async move {
                let ranges: Vec<Bson> = taken
                    .iter()
                    .map(|owner| Bson::Document(owner_buckets(owner, first[owner.as_str()], None)))
                    .collect();
                let write = Write {
                    filter: doc! { "messages.id": id.0, "$or": ranges },
                    read,
                    check,
                    select,
                    op: op.clone(),
                };
                match self.converge(&write).await {
                    Err(error) if error.is_not_found() => Ok(()),
                    Ok(()) => {
                        found_any.store(true, std::sync::atomic::Ordering::Relaxed);
                        Ok(())
                    }
                    Err(error) => Err(error),
                }
            })
            .await?;
        if found_any.load(std::sync::atomic::Ordering::Relaxed) {
            Ok(())
        } else {
            Err(message_not_found(id))
        }
    }

    /// Applies `op` to `owner`'s entry of message `id`. Unknown to `owner` (or, unless
    /// `gone_is_found`, deleted or retracted) is [`Error::NotFound`].
    pub(super) async fn change_entry(
        &self,
        owner: &str,
        id: MessageId,
        op: Op,
        gone_is_found: bool,
    ) -> Result<()> {
        let check = move |buckets: &[Bucket]| {
            let found = buckets
                .iter()
                .flat_map(|b| &b.entries)
                .any(|seen| seen.is(id) && (gone_is_found || !seen.gone));
            if found {
                Ok(())
            } else {
                Err(message_not_found(id))
            }
        };
        let select = move |_: &Bucket, seen: &Seen| seen.is(id);
        let mut filter = owner_buckets(owner, 0, None);
        filter.insert("messages.id", id.0);
        let write = Write {
            filter,
            read: Read::Flags,
            check: &check,
            select: &select,
            op,
        };
        self.converge_owner(owner, &write).await
    }

    /// The `count` and `unread` of the buckets `filter` selects (the first `limit` of them in
    /// `order`, when given), through `index` when named: one `find`, retried.
    pub(super) async fn read_counts(
        &self,
        filter: Document,
        first: Option<(Document, i64)>,
        index: Option<&str>,
    ) -> Result<Vec<Document>> {
        self.backend
            .retry("read counts", || async {
                let mut find = self
                    .buckets
                    .find(filter.clone())
                    .projection(doc! { "_id": 0, "count": 1, "unread": 1 })
                    .batch_size(100_000);
                if let Some((order, limit)) = &first {
                    find = find.sort(order.clone()).limit(*limit);
                }
                if let Some(index) = index {
                    find = find.hint(Hint::Name(index.to_owned()));
                }
                Ok(find.await?.try_collect().await?)
            })
            .await
    }

    /// How many messages `owner`'s inbox shows: `count - hidden` summed over its buckets (one
    /// `find` of those two fields).
    pub(in crate::inbox) async fn count(&self, owner: &str) -> Result<u64> {
        let buckets: Vec<Document> = self
            .buckets
            .find(owner_buckets(owner, 0, None))
            .projection(doc! { "_id": 0, "count": 1, "hidden": 1 })
            .batch_size(100_000)
            .await?
            .try_collect()
            .await?;
        Ok(buckets
            .iter()
            .map(|b| (integer(b, "count").unwrap_or(0) - integer(b, "hidden").unwrap_or(0)).max(0))
            .sum::<i64>() as u64)
    }
}
