//! A brin or embedded range search of a remote component read from its
//! column image (`storage::column_image`): the chunks holding the
//! candidate blocks, only the fields the caller reads (and the searched
//! one), each row checked as `embedded_blocks` checks a block's records.
//! The hits carry a record of just those fields.

use super::{Found, QueryStats, Src, TopK};
use crate::dataset::Dataset;
use crate::error::Result;
use crate::storage::ComponentReader;
use crate::storage::block_filters::{attr_key, in_range};
use crate::storage::column_image::ColumnImage;
use crate::value::{self, encode_raw_fields};
use std::ops::Bound;

/// Chunks fetched and searched at a time: bounds the memory of one
/// search (a chunk is about 8,192 rows) while keeping GETs side by side.
const BATCH_CHUNKS: usize = 32;

/// The image's columns a search of `field` reading `fields` needs: each
/// name as a column, and the first part of a dotted one (`a` of `a.b`),
/// whose value holds it.
fn needed_columns(img: &ColumnImage, field: &str, fields: &[String]) -> Vec<usize> {
    let mut cols: Vec<usize> = std::iter::once(field)
        .chain(fields.iter().map(String::as_str))
        .flat_map(|f| [Some(f), f.split_once('.').map(|(a, _)| a)])
        .flatten()
        .filter_map(|f| img.column(f.as_bytes()))
        .collect();
    cols.sort_unstable();
    cols.dedup();
    cols
}

impl Dataset {
    /// Search the candidate `blocks` (ascending) of source `j`, remote
    /// component `c`, through its column image, keeping hits whose
    /// `field` lies in `(lo, hi)` with records of `fields` only. False
    /// (nothing searched) when the image does not cover a block.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn image_blocks(
        srcs: &[Src],
        j: usize,
        c: &ComponentReader,
        img: &ColumnImage,
        blocks: &[(usize, u64)],
        field: &str,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        fields: &[String],
        top: &mut TopK,
        stats: &mut QueryStats,
    ) -> Result<bool> {
        let Some(chunks) = img.chunks_of(blocks.iter().map(|&(b, _)| b)) else {
            return Ok(false);
        };
        if img
            .chunks()
            .last()
            .is_none_or(|l| (l.first_block + l.blocks) as usize != c.num_blocks())
        {
            return Ok(false);
        }
        let cols = needed_columns(img, field, fields);
        // The searched field read straight from its column when it has
        // one; otherwise (a dotted path) from the record made of the row.
        let direct = img
            .column(field.as_bytes())
            .and_then(|f| cols.iter().position(|&x| x == f));
        let mut key = Vec::new();
        let batches: Vec<&[usize]> = chunks.chunks(BATCH_CHUNKS).collect();
        let cols = &cols;
        std::thread::scope(|sc| -> Result<()> {
            // The next batch is fetched while this one is searched.
            let fetch = |b: &'_ [usize]| {
                let b = b.to_vec();
                sc.spawn(move || img.read(&b, cols))
            };
            let mut next = batches.first().map(|b| fetch(b));
            for (i, batch) in batches.iter().enumerate() {
                let data = match next.take() {
                    Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?,
                    None => break,
                };
                next = batches.get(i + 1).map(|b| fetch(b));
                let mut cands: Vec<Found> = Vec::new();
                for (d, &ch) in data.iter().zip(*batch) {
                    stats.blocks += u64::from(img.chunks()[ch].blocks);
                    d.for_each_row(img.url(), |pk, seq, vals| {
                        if let Some(i) = direct {
                            let Some(v) = vals[i] else {
                                return Ok(());
                            };
                            // As `attr_key` reads a record's field.
                            let Ok(v) = value::decode_value(v) else {
                                return Ok(());
                            };
                            key.clear();
                            if v.is_null()
                                || value::encode_key(std::slice::from_ref(&v), &mut key).is_err()
                                || !in_range(&key, lo, hi)
                            {
                                return Ok(());
                            }
                        }
                        let n = vals.iter().filter(|v| v.is_some()).count();
                        let mut rec = Vec::new();
                        encode_raw_fields(
                            n,
                            cols.iter()
                                .zip(vals)
                                .filter_map(|(&c, v)| v.map(|v| (img.column_name(c), v))),
                            &mut rec,
                        );
                        if direct.is_none()
                            && !attr_key(&rec, field).is_some_and(|a| in_range(&a, lo, hi))
                        {
                            return Ok(());
                        }
                        cands.push(Found {
                            seq,
                            pk: pk.to_vec(),
                            value: rec,
                        });
                        Ok(())
                    })?;
                }
                Self::admit(srcs, j, cands, top, stats)?;
            }
            Ok(())
        })?;
        Ok(true)
    }
}
