//! Bytes stored per item (message or comment), from `collStats`.

use bson::{doc, Bson, RawDocumentBuf};
use futures::TryStreamExt;
use mongodb::Database;

use crate::report::Storage;
use crate::BoxResult;

fn number(value: Option<&Bson>) -> Option<f64> {
    match value? {
        Bson::Int32(v) => Some(f64::from(*v)),
        Bson::Int64(v) => Some(*v as f64),
        Bson::Double(v) => Some(*v),
        _ => None,
    }
}

/// Data and index bytes of every collection in `db` (one subject's database, so everything in
/// it is the subject's), per item of `items`. Where `collStats` gives no `size`, the encoded
/// size of every document stands in (and the note says so); where it gives no
/// `totalIndexSize`, the index figure is unknown (NaN) and the note says so.
pub async fn per_item(db: &Database, items: usize) -> BoxResult<Storage> {
    let mut data = 0.0;
    let mut index = 0.0;
    let mut notes = Vec::new();
    let mut names = db.list_collection_names().await?;
    names.retain(|name| !name.starts_with("system."));
    names.sort();
    for name in &names {
        let stats = db.run_command(doc! { "collStats": name.as_str() }).await?;
        match number(stats.get("size")) {
            Some(size) => data += size,
            None => {
                let mut cursor = db.collection::<RawDocumentBuf>(name).find(doc! {}).await?;
                while let Some(document) = cursor.try_next().await? {
                    data += document.as_bytes().len() as f64;
                }
                notes.push(format!("{name}: no size, estimated from BSON bytes"));
            }
        }
        match number(stats.get("totalIndexSize")) {
            Some(size) => index += size,
            None => {
                index = f64::NAN;
                notes.push(format!("{name}: no totalIndexSize"));
            }
        }
    }
    let mut note = format!("collections: {}", names.join("+"));
    if !notes.is_empty() {
        note = format!("{note}; {}", notes.join("; "));
    }
    Ok(Storage {
        data_per_item: data / items as f64,
        index_per_item: index / items as f64,
        note,
    })
}
