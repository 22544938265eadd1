//! Cursors over a component file: forward from a start bound (reading no
//! block past an end bound) and backward from an end bound.

use super::*;

impl ComponentReader {
    /// An ordered cursor starting at the first key within `start`.
    /// `use_cache = false` is for merges, which should not evict query blocks.
    pub fn iter(self: &Arc<Self>, start: Bound<&[u8]>, use_cache: bool) -> Result<ComponentIter> {
        self.iter_until(start, Bound::Unbounded, use_cache)
    }

    /// [`ComponentReader::iter`] that reads no block after the one holding
    /// the end bound `end` (it may still hand out keys past `end` from that
    /// block). A merge iterator reads its sources' next keys ahead, so a
    /// bounded scan read one block past its range: on a remote component a
    /// GET of its own.
    pub fn iter_until(
        self: &Arc<Self>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        use_cache: bool,
    ) -> Result<ComponentIter> {
        let mut it = ComponentIter {
            reader: self.clone(),
            block_idx: 0,
            block: None,
            pos: 0,
            cur: RawEntry::default(),
            use_cache,
            peeked: None,
            end: match end {
                Bound::Included(k) | Bound::Excluded(k) => Some(k.to_vec()),
                Bound::Unbounded => None,
            },
        };
        let (k, excluded) = match start {
            Bound::Unbounded => {
                it.load_block(0)?;
                return Ok(it);
            }
            Bound::Included(k) => (k, false),
            Bound::Excluded(k) => (k, true),
        };
        let i = self.find_block(k);
        it.load_block(i)?;
        if let Some(b) = it.block.clone() {
            match b.seek(k).map_err(|e| Error::corrupt(&self.path, e))? {
                Some((next, e)) => {
                    it.pos = next;
                    if !(excluded && e.key.as_slice() == k) {
                        let entry = it.make_entry(&b, &e)?;
                        it.peeked = Some((e.key.clone(), entry));
                    }
                    it.cur = e;
                }
                None => it.load_block(i + 1)?,
            }
        }
        Ok(it)
    }
}

/// An ordered cursor over one component file.
pub struct ComponentIter {
    reader: Arc<ComponentReader>,
    block_idx: usize,
    block: Option<Arc<Block>>,
    pos: usize,
    cur: RawEntry,
    use_cache: bool,
    peeked: Option<(Vec<u8>, Entry)>,
    /// No block after the one whose index key reaches this is read.
    end: Option<Vec<u8>>,
}

impl ComponentIter {
    fn load_block(&mut self, i: usize) -> Result<()> {
        self.block_idx = i;
        self.pos = 0;
        self.cur.key.clear();
        self.block = if i < self.reader.num_blocks() {
            Some(self.reader.block(i, self.use_cache)?)
        } else {
            None
        };
        Ok(())
    }

    fn make_entry(&self, b: &Block, e: &RawEntry) -> Result<Entry> {
        let kind = EntryKind::from_u8(e.kind).ok_or_else(|| {
            Error::corrupt(self.reader.path(), format!("unknown entry kind {}", e.kind))
        })?;
        Ok(Entry {
            seq: e.seq,
            kind,
            value: b.value(e).to_vec(),
        })
    }

    /// The next entry in key order, or `None` at the end.
    pub fn next_entry(&mut self) -> Result<Option<(Vec<u8>, Entry)>> {
        if let Some(p) = self.peeked.take() {
            return Ok(Some(p));
        }
        loop {
            let Some(b) = self.block.clone() else {
                return Ok(None);
            };
            if self.pos < b.entries_end() {
                self.pos = b
                    .decode_at(self.pos, &mut self.cur)
                    .map_err(|e| Error::corrupt(self.reader.path(), e))?;
                let entry = self.make_entry(&b, &self.cur)?;
                return Ok(Some((self.cur.key.clone(), entry)));
            }
            // The block index key is at least the block's last key and
            // below the next block's first: past it, every key is past
            // the end.
            if let Some(end) = &self.end
                && self.block_idx < self.reader.num_blocks()
                && self.reader.index_key(self.block_idx) >= end.as_slice()
            {
                self.block = None;
                return Ok(None);
            }
            self.load_block(self.block_idx + 1)?;
        }
    }

    pub fn reader(&self) -> &Arc<ComponentReader> {
        &self.reader
    }
}

/// A cursor over one component file in descending key order, from the last
/// key within an end bound. A block's entries are prefix-compressed and
/// decode only forwards, so each block is decoded whole and handed out
/// from its end; the previous block comes next.
pub struct ComponentRevIter {
    reader: Arc<ComponentReader>,
    /// The block to decode when `buf` runs out.
    next_block: Option<usize>,
    /// The current block's entries still to hand out, the next one last.
    buf: Vec<(Vec<u8>, Entry)>,
    /// Keys after this bound are skipped (only the first block has any).
    end: Bound<Vec<u8>>,
    use_cache: bool,
}

impl ComponentRevIter {
    /// The next entry in descending key order, or `None` at the start.
    pub fn next_entry(&mut self) -> Result<Option<(Vec<u8>, Entry)>> {
        loop {
            if let Some(e) = self.buf.pop() {
                return Ok(Some(e));
            }
            let Some(i) = self.next_block else {
                return Ok(None);
            };
            self.next_block = i.checked_sub(1);
            let b = self.reader.block(i, self.use_cache)?;
            let mut pos = 0;
            let mut cur = RawEntry::default();
            while pos < b.entries_end() {
                pos = b
                    .decode_at(pos, &mut cur)
                    .map_err(|e| Error::corrupt(self.reader.path(), e))?;
                let within = match &self.end {
                    Bound::Included(k) => cur.key.as_slice() <= k.as_slice(),
                    Bound::Excluded(k) => cur.key.as_slice() < k.as_slice(),
                    Bound::Unbounded => true,
                };
                if !within {
                    break;
                }
                let kind = EntryKind::from_u8(cur.kind).ok_or_else(|| {
                    Error::corrupt(
                        self.reader.path(),
                        format!("unknown entry kind {}", cur.kind),
                    )
                })?;
                let entry = Entry {
                    seq: cur.seq,
                    kind,
                    value: b.value(&cur).to_vec(),
                };
                self.buf.push((cur.key.clone(), entry));
            }
            // Every block before the first one read lies below the bound.
            self.end = Bound::Unbounded;
        }
    }
}

impl ComponentReader {
    /// A cursor in descending key order from the last key within `end`.
    pub fn iter_rev(self: &Arc<Self>, end: Bound<&[u8]>, use_cache: bool) -> ComponentRevIter {
        let n = self.num_blocks();
        // Block i holds the keys up to its index key: the last key within
        // `end` is in the first block whose index key reaches `end`.
        let first = match end {
            Bound::Unbounded => n.checked_sub(1),
            Bound::Included(k) | Bound::Excluded(k) => {
                let i = self.find_block(k);
                if i >= n { n.checked_sub(1) } else { Some(i) }
            }
        };
        ComponentRevIter {
            reader: self.clone(),
            next_block: first,
            buf: Vec::new(),
            end: end.map(<[u8]>::to_vec),
            use_cache,
        }
    }
}
