//! Flush: an immutable memtable becomes a disk component (log before data,
//! no-steal), then the merge policy is consulted.

use super::*;

impl LsmTree {
    pub(super) fn new_meta(&self, level: u32) -> ComponentMeta {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        ComponentMeta {
            id,
            level,
            ..Default::default()
        }
    }

    /// Write a full memtable to a new disk component and install it.
    pub fn flush(self: &Arc<Self>, mem: &Arc<MemTable>) -> Result<()> {
        // Concurrent policy: while the component count is at its limit, the
        // flush stalls behind merges (run here, after any merge already running
        // in the background finishes), then proceeds even if no merge applies,
        // so a flush can never wait forever.
        if self
            .cfg
            .policy
            .should_stall_flush(&self.infos(&self.state.read().disk, &[]))
        {
            self.counters.flush_stalls.fetch_add(1, Ordering::Relaxed);
            while self.merge_once()? {}
        }
        // No-steal: wait until every transaction that wrote into this memtable
        // has logged its COMMIT or ABORT, then make the log durable first.
        while mem.active_writers() > 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
        if mem.lsn_range().is_some() {
            let hook = self.log_sync.read().clone();
            if let Some(h) = hook {
                h.sync_log()?;
            }
        }
        let mut meta = self.new_meta(0);
        meta.min_flush_id = meta.id;
        meta.max_flush_id = meta.id;
        if let Some((lo, hi)) = mem.lsn_range() {
            meta.min_lsn = lo;
            meta.max_lsn = hi;
        }
        let path = component_path(&self.cfg.dir, meta.id);
        let reader = if mem.is_empty() {
            None
        } else {
            let mut w =
                ComponentBuilder::create(&path, meta, self.cfg.writer.clone(), self.cfg.kind)?;
            self.attach_observer(&mut w);
            match self.flush_transform() {
                Some(t) => t.write(mem, &mut w)?,
                None => mem.for_each(|k, kind, seq, v| w.add(k, kind, seq, v))?,
            }
            let r = match w.finish(&self.cache)? {
                Some(r) => Some(self.place(r)?),
                None => None,
            };
            if let Some(r) = &r {
                self.counters
                    .bytes_flushed
                    .fetch_add(r.meta().file_bytes, Ordering::Relaxed);
            }
            r
        };
        {
            let _m = self.manifest_lock.lock();
            if let Some((lo, _)) = mem.lsn_range() {
                let mut u = self.unlisted_lsn.lock();
                let l = lo.saturating_sub(1);
                *u = Some(u.map_or(l, |x| x.min(l)));
            }
            let new_disk = {
                let mut st = self.state.write();
                if let Some(r) = reader {
                    let mut d: Vec<_> = st.disk.as_ref().clone();
                    d.insert(0, r);
                    st.disk = Arc::new(d);
                }
                st.immutables.retain(|m| !Arc::ptr_eq(m, mem));
                st.disk.clone()
            };
            self.flush_count.fetch_add(1, Ordering::SeqCst);
            self.counters.flushes.fetch_add(1, Ordering::Relaxed);
            // On failure the mark stays: the log keeps these records.
            self.write_manifest(&new_disk)?;
            *self.unlisted_lsn.lock() = None;
        }
        self.notify_changed();
        Ok(())
    }

    /// Block until no full in-memory component is waiting for its flush,
    /// and the MANIFEST lists every flushed one.
    pub fn wait_flushed(&self) -> Result<()> {
        loop {
            self.check_failed()?;
            let mut g = self.changed_lock.lock();
            // Flushed = listed by a written MANIFEST, not only out of memory.
            if self.state.read().immutables.is_empty() && self.unlisted_lsn.lock().is_none() {
                return Ok(());
            }
            self.changed.wait_for(&mut g, Duration::from_millis(50));
        }
    }
}
