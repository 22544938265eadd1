//! Records checked and encoded ahead of their write, into one buffer: a
//! [`PreparedBatch`].
//!
//! A loader prepares the next batch on one thread
//! ([`Dataset::prepare_into`], [`Dataset::prepare_row_into`]) while another
//! writes the last one ([`Dataset::write_prepared`],
//! [`Dataset::write_prepared_unacknowledged`]). A batch keeps every
//! record's key and encoding in one buffer, emptied and refilled batch after
//! batch, so a load allocates nothing per record. (With a key and a record
//! allocated per record on the preparing thread and freed on the writing
//! one, the allocator kept handing out fresh pages: the kernel's clearing
//! of them was as much of a bulk load's time as the memtable's inserts.)

use super::write::PreparedUnder;
use super::*;

/// A batch keeps at most this much memory when it is emptied (a batch
/// that held one huge record does not keep its buffer for the whole load).
const KEEP_BYTES: usize = 16 << 20;

/// Records prepared for one dataset: see the module documentation.
#[derive(Clone, Debug, Default)]
pub struct PreparedBatch {
    /// The dataset the records are prepared for (`None` while empty).
    dataset: Option<u32>,
    /// The definition the first record was prepared under (`None` while
    /// empty).
    def: Option<Arc<DatasetDef>>,
    /// A later record was prepared under another definition (an `ALTER
    /// TABLE` came between): the batch is refused as a whole.
    mixed: bool,
    /// Each record's encoded key, then its encoded record, record after record.
    data: Vec<u8>,
    /// Per record: where its key ends and where its record ends in `data`.
    ends: Vec<(usize, usize)>,
}

impl PreparedBatch {
    /// An empty batch.
    pub fn new() -> PreparedBatch {
        PreparedBatch::default()
    }

    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Empty the batch, keeping its memory for the next one.
    pub fn clear(&mut self) {
        self.dataset = None;
        self.def = None;
        self.mixed = false;
        self.data.clear();
        self.ends.clear();
        if self.data.capacity() > KEEP_BYTES {
            self.data = Vec::new();
        }
    }

    /// Record `i`'s encoded primary key.
    pub fn key(&self, i: usize) -> Option<&[u8]> {
        self.get(i).map(|(k, _)| k)
    }

    /// Record `i`'s encoded record.
    pub fn record(&self, i: usize) -> Option<&[u8]> {
        self.get(i).map(|(_, r)| r)
    }

    fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let (key_end, end) = *self.ends.get(i)?;
        let start = self.start_of(i);
        Some((&self.data[start..key_end], &self.data[key_end..end]))
    }

    /// Where record `i` (at most `len()`) starts in `data`.
    fn start_of(&self, i: usize) -> usize {
        match i.checked_sub(1) {
            Some(prev) => self.ends[prev].1,
            None => 0,
        }
    }

    /// Every record's (key, record), in order.
    pub(super) fn rows(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8])> {
        self.ends.iter().enumerate().map(|(i, &(key_end, end))| {
            let start = self.start_of(i);
            (&self.data[start..key_end], &self.data[key_end..end])
        })
    }

    /// Append one record for dataset `ds`: `write` appends its key and
    /// then its record, prepared under the definition it is given, to the
    /// buffer and returns the key's length. On an error nothing of it
    /// stays.
    pub(super) fn push_with(
        &mut self,
        ds: &Dataset,
        def: Arc<DatasetDef>,
        write: impl FnOnce(&Arc<DatasetDef>, &mut Vec<u8>) -> Result<usize>,
    ) -> Result<()> {
        ds.check_batch(self)?;
        let start = self.data.len();
        match write(&def, &mut self.data) {
            Ok(key_len) => {
                match &self.def {
                    Some(d) => self.mixed |= !Arc::ptr_eq(d, &def),
                    None => self.def = Some(def),
                }
                self.dataset = Some(ds.id);
                self.ends.push((start + key_len, self.data.len()));
                Ok(())
            }
            Err(e) => {
                self.data.truncate(start);
                Err(e)
            }
        }
    }
}

impl Dataset {
    /// Check and encode `record` into `batch`, for
    /// [`Dataset::write_prepared`] (the work of [`Dataset::prepare`],
    /// which a caller may do on another thread). A batch holds records of
    /// one dataset.
    pub fn prepare_into(&self, record: Value, batch: &mut PreparedBatch) -> Result<()> {
        batch.push_with(self, self.def(), |def, out| {
            self.prepare_to(def, record, out)
        })
    }

    /// Refuse `batch` if its records were not all prepared under the
    /// definition the dataset has now (the caller holds the DDL lock
    /// shared).
    pub(super) fn check_batch_shape(&self, batch: &PreparedBatch) -> Result<()> {
        match &batch.def {
            Some(_) if batch.mixed => Err(Error::Altered {
                dataset: self.name.clone(),
            }),
            Some(d) => self.check_shape(d),
            None => Ok(()),
        }
    }

    /// Refuse a batch prepared for another dataset.
    pub(super) fn check_batch(&self, batch: &PreparedBatch) -> Result<()> {
        match batch.dataset {
            Some(id) if id != self.id => Err(Error::invalid(
                None,
                format!(
                    "records prepared for dataset id {id} given to `{}`",
                    self.name
                ),
            )),
            _ => Ok(()),
        }
    }

    /// [`Dataset::write_batch`] of the records prepared in `batch`
    /// (possibly on another thread, while this one writes).
    pub fn write_prepared(&self, batch: &PreparedBatch, opts: BatchOptions) -> Result<BatchReport> {
        self.check_batch(batch)?;
        self.write_ops(opts, batch.rows().map(Ok), PreparedUnder::Batch(batch))
    }

    /// [`Dataset::write_prepared`] of one atomic batch in `mode`, returning
    /// before its acknowledgment: the caller waits for the [`PendingAck`]
    /// (given when the batch committed) before it counts the records as
    /// durable, and may apply its next batch meanwhile, overlapping that
    /// work with this batch's log flush. The batch's keys stay locked until
    /// its COMMIT is written.
    pub fn write_prepared_unacknowledged(
        &self,
        batch: &PreparedBatch,
        mode: WriteMode,
    ) -> Result<(BatchReport, Option<PendingAck>)> {
        self.check_batch(batch)?;
        // Not led: the log flush overlaps the caller's next batch.
        self.write_ops_atomic_unacked(
            mode,
            batch.rows().map(Ok),
            PreparedUnder::Batch(batch),
            false,
        )
    }
}
