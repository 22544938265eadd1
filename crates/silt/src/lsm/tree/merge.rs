//! Merges: asking the policy, leveled moves, and writing a merge's output:
//! reconciliation (antimatter, deleted keys, value mergers), cutting the
//! output by size or by spatial region, and installing it with the MANIFEST.

use super::*;

impl LsmTree {
    pub(super) fn infos(
        &self,
        disk: &[Arc<ComponentReader>],
        merging: &[u64],
    ) -> Vec<ComponentInfo> {
        let spatial = self.spatial_partitioning().is_some();
        disk.iter()
            .map(|c| {
                let m = c.meta();
                ComponentInfo {
                    id: m.id,
                    size_bytes: m.file_bytes,
                    entries: m.entries,
                    level: m.level,
                    min_key: m.min_key.clone(),
                    max_key: m.max_key.clone(),
                    merging: merging.contains(&m.id),
                    mbr: if spatial { self.key_region(c) } else { None },
                }
            })
            .collect()
    }

    /// The spatial partitioning of this tree's leveled merges, if any (an
    /// R-tree with antimatter under `leveled(..., str|rstar_grove)`).
    pub(super) fn spatial_partitioning(&self) -> Option<Partitioning> {
        match &self.cfg.policy {
            MergePolicy::Leveled { partitioning, .. }
                if *partitioning != Partitioning::Size
                    && self.cfg.kind.spatial
                    && !self.cfg.kind.deleted_keys() =>
            {
                Some(*partitioning)
            }
            _ => None,
        }
    }

    /// The region a component's keys can stand for: its MBR grown by two
    /// key cells (two versions of one key may carry different bounds, but
    /// their centres share the key's cell, so their components' regions
    /// always meet).
    pub(super) fn key_region(&self, c: &ComponentReader) -> Option<[f64; 4]> {
        let t = crate::lsm::kind::packed_rtree(c)?;
        let top = t.top_level();
        let mut r = [
            f64::INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NEG_INFINITY,
        ];
        for i in 0..t.nodes(top) {
            let m = t.mbr(top, i);
            r = [
                r[0].min(m[0]),
                r[1].min(m[1]),
                r[2].max(m[2]),
                r[3].max(m[3]),
            ];
        }
        if r[0] > r[2] || r[1] > r[3] {
            return None;
        }
        let s = self.cfg.key_space;
        if !(r[0] >= s[0] && r[1] >= s[1] && r[2] <= s[2] && r[3] <= s[3]) {
            // Entries outside the space share the edge cells' keys with
            // entries anywhere beyond that edge: such a component may meet
            // any other.
            return Some([
                f64::NEG_INFINITY,
                f64::NEG_INFINITY,
                f64::INFINITY,
                f64::INFINITY,
            ]);
        }
        let [w, h] = self.cfg.key_cell;
        Some([
            r[0] - 2.0 * w,
            r[1] - 2.0 * h,
            r[2] + 2.0 * w,
            r[3] + 2.0 * h,
        ])
    }

    /// The centres of the leaves of `inputs` (the spatial partitioner's sample).
    pub(super) fn leaf_centres(inputs: &[Arc<ComponentReader>]) -> Vec<[f64; 2]> {
        let mut out = Vec::new();
        for c in inputs {
            if let Some(t) = crate::lsm::kind::packed_rtree(c) {
                for i in 0..t.nodes(0) {
                    out.push(spatial_partitioning::centre(&t.mbr(0, i)));
                }
            }
        }
        out
    }

    /// Mark that a merge check is wanted; returns false if one is already queued.
    pub(crate) fn try_mark_merge_scheduled(&self) -> bool {
        !self.merge_scheduled.swap(true, Ordering::AcqRel)
    }

    /// Ask the policy for a merge and run it. Returns whether a merge ran.
    pub fn merge_once(self: &Arc<Self>) -> Result<bool> {
        self.merge_scheduled.store(false, Ordering::Release);
        let _g = self.merge_lock.lock();
        let disk = self.state.read().disk.clone();
        let infos = self.infos(&disk, &[]);
        let ctx = PolicyContext {
            memtable_bytes: self.cfg.memtable_bytes,
            flush_count: self.flush_count.load(Ordering::SeqCst),
        };
        let (inputs, level): (Vec<Arc<ComponentReader>>, u32) =
            match self.cfg.policy.decide(&infos, &ctx) {
                MergeDecision::None => return Ok(false),
                MergeDecision::Stack { start, end } => {
                    if start >= end || end > disk.len() {
                        return Ok(false);
                    }
                    (disk[start..end].to_vec(), 0)
                }
                MergeDecision::Leveled {
                    inputs,
                    output_level,
                } => (
                    disk.iter()
                        .filter(|c| inputs.contains(&c.meta().id))
                        .cloned()
                        .collect(),
                    output_level,
                ),
            };
        if inputs.is_empty() {
            return Ok(false);
        }
        // A leveled merge of one component (nothing below overlaps it) moves
        // the file down a level instead of rewriting it (LevelDB's "trivial
        // move"): no bytes written, the same entries in the same order.
        if let [only] = inputs.as_slice()
            && self.cfg.policy.is_leveled()
            && level > only.meta().level
        {
            self.move_component(only, level)?;
            return Ok(true);
        }
        self.merge_components(&disk, &inputs, level)?;
        Ok(true)
    }

    /// Place component `c` at `level` without rewriting it: a second reader
    /// of the same file replaces it in the list and the MANIFEST records the
    /// new level (the file keeps the level it was written at; at open the
    /// MANIFEST's level wins). The old reader is not marked obsolete, so
    /// dropping it leaves the file alone, unless the move uploaded the file
    /// into the remote tier.
    pub(super) fn move_component(&self, c: &Arc<ComponentReader>, level: u32) -> Result<()> {
        let moved = self.reopen_at(c, level)?;
        let id = c.meta().id;
        {
            let _m = self.manifest_lock.lock();
            let new_disk = {
                let mut st = self.state.write();
                let d: Vec<Arc<ComponentReader>> = st
                    .disk
                    .iter()
                    .map(|x| {
                        if x.meta().id == id {
                            moved.clone()
                        } else {
                            x.clone()
                        }
                    })
                    .collect();
                st.disk = Arc::new(leveled_order(d));
                st.disk.clone()
            };
            self.counters.moves.fetch_add(1, Ordering::Relaxed);
            self.write_manifest(&new_disk)?;
        }
        // Moved into the bucket: the local file is no longer listed.
        if moved.is_remote() && !c.is_remote() {
            c.mark_obsolete();
        }
        self.notify_changed();
        Ok(())
    }

    /// Merge everything into one component (manual `compact`).
    pub fn compact_all(self: &Arc<Self>) -> Result<()> {
        let _g = self.merge_lock.lock();
        let disk = self.state.read().disk.clone();
        if disk.len() <= 1
            && disk
                .iter()
                .all(|c| c.meta().tombstones == 0 && !has_deleted(c))
        {
            return Ok(());
        }
        let level = disk.iter().map(|c| c.meta().level).max().unwrap_or(0);
        let level = if self.cfg.policy.is_leveled() {
            level.max(1)
        } else {
            0
        };
        self.merge_components(&disk, &disk, level)
    }

    pub(super) fn merge_components(
        self: &Arc<Self>,
        disk: &[Arc<ComponentReader>],
        inputs: &[Arc<ComponentReader>],
        level: u32,
    ) -> Result<()> {
        let input_ids: Vec<u64> = inputs.iter().map(|c| c.meta().id).collect();
        let spatial = self.spatial_partitioning();
        let drop_antimatter = self.can_drop_antimatter(disk, inputs, &input_ids, spatial);
        // Sources in list order = newest first.
        let ordered: Vec<Arc<ComponentReader>> = disk
            .iter()
            .filter(|c| input_ids.contains(&c.meta().id))
            .cloned()
            .collect();
        let mut sources = Vec::with_capacity(ordered.len());
        for c in &ordered {
            sources.push(Source::Disk(c.iter(Bound::Unbounded, false)?));
        }
        let merger = self.value_merger();
        let mut it = MergeIter::new(sources)?.with_merger(merger.clone());
        let mut out = MergeOutput::new(self, inputs, level, spatial);
        // Inputs with a deleted-key tree (positions in `ordered`).
        let dk = self.cfg.kind.deleted_keys();
        let with_dk: Vec<usize> = (0..ordered.len())
            .filter(|&i| has_deleted(&ordered[i]))
            .collect();
        let result: Result<()> = (|| {
            while let Some((k, e, rank)) = it.next_ranked()? {
                if drop_antimatter && e.is_delete() {
                    continue;
                }
                let e = match &merger {
                    Some(m) => match m.finish(&k, e, drop_antimatter)? {
                        Some(e) => e,
                        None => continue,
                    },
                    None => e,
                };
                if dk && self.deleted_by_newer_input(&ordered, &with_dk, rank, &k)? {
                    continue;
                }
                out.add(&k, &e)?;
            }
            if dk && !drop_antimatter {
                // Older components may still hold entries these keys hide.
                out.carry_deleted_keys(with_dk.iter().map(|&i| &ordered[i]))?;
            }
            out.finish_all()
        })();
        if let Err(e) = result {
            out.abandon();
            return Err(e);
        }
        self.install_merge(inputs, &input_ids, out.outputs, out.written)?;
        self.notify_changed();
        Ok(())
    }

    /// Whether a merge of `inputs` may drop antimatter: nothing older than
    /// the inputs could hold the same keys, i.e. no component outside the
    /// inputs that comes later in the list (older) overlaps them (their key
    /// range; their regions when levels are spatially partitioned, since
    /// those overlap in key ranges; anything at all for a deleted-key tree,
    /// whose deleted primary keys may hide entries under any key).
    fn can_drop_antimatter(
        &self,
        disk: &[Arc<ComponentReader>],
        inputs: &[Arc<ComponentReader>],
        input_ids: &[u64],
        spatial: Option<Partitioning>,
    ) -> bool {
        let last_input_pos = disk
            .iter()
            .rposition(|c| input_ids.contains(&c.meta().id))
            .unwrap_or(0);
        if spatial.is_some() {
            let all = self.infos(disk, &[]);
            let ins: Vec<&ComponentInfo> =
                all.iter().filter(|c| input_ids.contains(&c.id)).collect();
            return !all[last_input_pos + 1..].iter().any(|c| {
                !input_ids.contains(&c.id) && ins.iter().any(|i| components_overlap(i, c))
            });
        }
        let lo_key = inputs
            .iter()
            .map(|c| c.meta().min_key.clone())
            .min()
            .unwrap_or_default();
        let hi_key = inputs
            .iter()
            .map(|c| c.meta().max_key.clone())
            .max()
            .unwrap_or_default();
        let dk = self.cfg.kind.deleted_keys();
        !disk[last_input_pos + 1..].iter().any(|c| {
            let m = c.meta();
            !input_ids.contains(&m.id) && (dk || (m.min_key <= hi_key && m.max_key >= lo_key))
        })
    }

    /// Deleted-key reconciliation: whether an input newer than the one the
    /// entry `key` comes from (`rank`) deleted its primary key.
    fn deleted_by_newer_input(
        &self,
        ordered: &[Arc<ComponentReader>],
        with_dk: &[usize],
        rank: usize,
        key: &[u8],
    ) -> Result<bool> {
        if with_dk.first().is_none_or(|&f| f >= rank) {
            return Ok(false);
        }
        let pk = self.cfg.kind.pk.pk(key)?;
        for &i in with_dk.iter().take_while(|&&i| i < rank) {
            if deleted_contains(&ordered[i], pk)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Replace the inputs by the outputs in the component list (in place of
    /// the newest input; leveled order restored), record it in the MANIFEST,
    /// and let the inputs go (deleted when their last reader is done).
    fn install_merge(
        &self,
        inputs: &[Arc<ComponentReader>],
        input_ids: &[u64],
        outputs: Vec<Arc<ComponentReader>>,
        written: u64,
    ) -> Result<()> {
        let _m = self.manifest_lock.lock();
        let new_disk = {
            let mut st = self.state.write();
            let cur = st.disk.as_ref();
            let first = cur
                .iter()
                .position(|c| input_ids.contains(&c.meta().id))
                .unwrap_or(cur.len());
            let mut d: Vec<Arc<ComponentReader>> = Vec::with_capacity(cur.len());
            for (i, c) in cur.iter().enumerate() {
                if i == first {
                    d.extend(outputs.iter().cloned());
                }
                if !input_ids.contains(&c.meta().id) {
                    d.push(c.clone());
                }
            }
            if first == cur.len() {
                d.extend(outputs.iter().cloned());
            }
            if self.cfg.policy.is_leveled() {
                d = leveled_order(d);
            }
            st.disk = Arc::new(d);
            st.disk.clone()
        };
        self.counters.merges.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_merged
            .fetch_add(written, Ordering::Relaxed);
        self.write_manifest(&new_disk)?;
        for c in inputs {
            c.mark_obsolete();
        }
        Ok(())
    }
}

/// Where a merge's entries go: one component at a time, cut at the leveled
/// policy's target size (levels >= 1), or one component per region of the
/// plane under spatial partitioning (seed 002 §3), each created on first use.
struct MergeOutput<'a> {
    tree: &'a LsmTree,
    level: u32,
    /// (min, max) flush ids and LSN marks of the inputs, for the outputs' metadata.
    flush_ids: (u64, u64),
    lsns: (u64, u64),
    split_bytes: u64,
    plan: Plan,
    writer: Option<ComponentBuilder>,
    regions: Vec<Option<ComponentBuilder>>,
    outputs: Vec<Arc<ComponentReader>>,
    /// Bytes of the finished outputs (deleted-key companions included).
    written: u64,
}

impl<'a> MergeOutput<'a> {
    fn new(
        tree: &'a LsmTree,
        inputs: &[Arc<ComponentReader>],
        level: u32,
        spatial: Option<Partitioning>,
    ) -> Self {
        let dk = tree.cfg.kind.deleted_keys();
        let split_bytes = match &tree.cfg.policy {
            MergePolicy::Leveled {
                target_file_bytes, ..
            } if level > 0 && !dk && spatial.is_none() => *target_file_bytes,
            _ => u64::MAX,
        };
        let plan = match (&tree.cfg.policy, spatial) {
            (
                MergePolicy::Leveled {
                    target_file_bytes, ..
                },
                Some(part),
            ) if level > 0 => {
                let bytes: u64 = inputs.iter().map(|c| c.meta().file_bytes).sum();
                let p = usize::try_from(bytes.div_ceil((*target_file_bytes).max(1)))
                    .unwrap_or(usize::MAX)
                    .clamp(1, 4096);
                let sample = LsmTree::leaf_centres(inputs);
                match part {
                    Partitioning::Str => Plan::str(sample, p),
                    Partitioning::RstarGrove => Plan::grove(sample, p),
                    Partitioning::Size => Plan::Single,
                }
            }
            _ => Plan::Single,
        };
        let flush_ids = inputs.iter().fold((u64::MAX, 0), |(a, b), c| {
            (a.min(c.meta().min_flush_id), b.max(c.meta().max_flush_id))
        });
        let lsns = inputs.iter().fold((u64::MAX, 0), |(a, b), c| {
            (a.min(c.meta().min_lsn), b.max(c.meta().max_lsn))
        });
        let mut regions = Vec::new();
        if plan != Plan::Single {
            regions.resize_with(plan.parts(), || None);
        }
        MergeOutput {
            tree,
            level,
            flush_ids,
            lsns,
            split_bytes,
            plan,
            writer: None,
            regions,
            outputs: Vec::new(),
            written: 0,
        }
    }

    fn new_builder(&self) -> Result<ComponentBuilder> {
        let t = self.tree;
        let mut meta = t.new_meta(self.level);
        meta.min_flush_id = self.flush_ids.0;
        meta.max_flush_id = self.flush_ids.1;
        meta.min_lsn = if self.lsns.0 == u64::MAX {
            0
        } else {
            self.lsns.0
        };
        meta.max_lsn = self.lsns.1;
        let p = component_path(&t.cfg.dir, meta.id);
        let mut b = ComponentBuilder::create(&p, meta, t.cfg.writer.clone(), t.cfg.kind)?;
        t.attach_observer(&mut b);
        Ok(b)
    }

    /// Add one reconciled entry (in key order).
    fn add(&mut self, k: &[u8], e: &Entry) -> Result<()> {
        if !self.regions.is_empty() {
            let (r, _) = decode_bounds(&e.value).ok_or_else(|| {
                Error::corrupt(
                    &self.tree.cfg.dir,
                    format!(
                        "R-tree entry with malformed bounds ({} bytes)",
                        e.value.len()
                    ),
                )
            })?;
            let slot = self.plan.route(spatial_partitioning::centre(&r));
            if self.regions[slot].is_none() {
                self.regions[slot] = Some(self.new_builder()?);
            }
            if let Some(w) = self.regions[slot].as_mut() {
                w.add(k, e.kind, e.seq, &e.value)?;
            }
            return Ok(());
        }
        if self.writer.is_none() {
            self.writer = Some(self.new_builder()?);
        }
        if let Some(w) = self.writer.as_mut() {
            w.add(k, e.kind, e.seq, &e.value)?;
            if w.bytes_written() >= self.split_bytes
                && let Some(w) = self.writer.take()
            {
                self.finish_one(w)?;
            }
        }
        Ok(())
    }

    /// Carry the deleted keys of `from` into the last output (a deleted-key
    /// merge that does not include the oldest component). Deleted-key trees
    /// are never spatially partitioned (that needs a leveled policy, which
    /// deleted keys refuse), so the output is the size-cut one.
    fn carry_deleted_keys<'c>(
        &mut self,
        from: impl Iterator<Item = &'c Arc<ComponentReader>>,
    ) -> Result<()> {
        for c in from {
            let Some(d) = c.companion() else { continue };
            if self.writer.is_none() {
                self.writer = Some(self.new_builder()?);
            }
            if let Some(w) = self.writer.as_mut() {
                let mut di = d.iter(Bound::Unbounded, false)?;
                while let Some((pk, _)) = di.next_entry()? {
                    w.add_deleted(&pk);
                }
            }
        }
        Ok(())
    }

    fn finish_one(&mut self, w: ComponentBuilder) -> Result<()> {
        if let Some(r) = w.finish(&self.tree.cache)? {
            let r = self.tree.place(r)?;
            self.written += r.meta().file_bytes;
            if let Some(d) = r.companion() {
                self.written += d.meta().file_bytes;
            }
            self.outputs.push(r);
        }
        Ok(())
    }

    /// Finish every open output.
    fn finish_all(&mut self) -> Result<()> {
        let regions: Vec<ComponentBuilder> =
            self.regions.iter_mut().filter_map(Option::take).collect();
        for w in regions {
            self.finish_one(w)?;
        }
        if let Some(w) = self.writer.take() {
            self.finish_one(w)?;
        }
        Ok(())
    }

    /// A failed merge: remove what was written.
    fn abandon(&mut self) {
        if let Some(w) = self.writer.take() {
            w.abandon();
        }
        for w in self.regions.iter_mut().filter_map(Option::take) {
            w.abandon();
        }
        for o in &self.outputs {
            o.mark_obsolete();
        }
    }
}
