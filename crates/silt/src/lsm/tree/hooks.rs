//! The [`LsmTree`] side of `lsm::hooks`: installing hooks, handing them to
//! flushes and merges, and rewriting existing components so that an
//! observer added later also covers them (the bulk build of an embedded
//! index).

use super::{LsmTree, component_path};
use crate::error::Result;
use crate::lsm::hooks::{FlushTransform, TreeHooks, ValueMerger};
use crate::lsm::kind::ComponentBuilder;
use crate::lsm::memtable::MemTable;
use crate::storage::{ComponentReader, Entry};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

impl LsmTree {
    /// Install `hooks` (replacing any). A memory-side secondary structure is
    /// attached to the current memtables too and indexes what they hold; the
    /// caller must keep writers out meanwhile (the dataset's DDL lock, or
    /// before the tree is used).
    pub fn set_hooks(&self, hooks: TreeHooks) {
        let mems = {
            let st = self.state.read();
            let mut v = vec![st.active.clone()];
            v.extend(st.immutables.iter().cloned());
            v
        };
        if let Some(h) = &hooks.mem_secondary {
            for m in &mems {
                m.attach_secondary(h.clone());
            }
        }
        if let Some(f) = &hooks.mem_facts {
            for m in &mems {
                m.attach_facts(f());
            }
        }
        *self.hooks.write() = hooks;
    }

    /// The installed hooks.
    pub fn hooks(&self) -> TreeHooks {
        self.hooks.read().clone()
    }

    /// Re-derive the in-memory secondary structure of the current memtables
    /// (after its key maker started covering more, e.g. a new attribute).
    /// Same writer restriction as [`set_hooks`](Self::set_hooks).
    pub fn refresh_secondary(&self) {
        let st = self.state.read().clone();
        st.active.backfill_secondary();
        for m in &st.immutables {
            m.backfill_secondary();
        }
    }

    /// A fresh memtable with the hooks' secondary structure and facts attached.
    pub(super) fn hooked_memtable(&self) -> MemTable {
        let m = Self::new_memtable(&self.cfg.kind);
        let hooks = self.hooks.read();
        if let Some(h) = hooks.mem_secondary.clone() {
            m.attach_secondary(h);
        }
        if let Some(f) = &hooks.mem_facts {
            m.attach_facts(f());
        }
        m
    }

    /// Give a new component builder its observer, if the hooks have one.
    pub(super) fn attach_observer(&self, b: &mut ComponentBuilder) {
        let f = self.hooks.read().observer.clone();
        if let Some(o) = f.and_then(|f| f.observer()) {
            b.set_observer(o);
        }
    }

    /// How flushes write memtables, if not entry for entry.
    pub(super) fn flush_transform(&self) -> Option<Arc<dyn FlushTransform>> {
        self.hooks.read().flush.clone()
    }

    /// How merges combine the versions of a key, if not newest-wins.
    pub(super) fn value_merger(&self) -> Option<Arc<dyn ValueMerger>> {
        self.hooks.read().merger.clone()
    }

    /// Rewrite every disk component for which `needs` holds, entry for entry
    /// (same level, key range, flush ids and LSN marks), so that the current
    /// observer sees it; `check` sees each entry first and may refuse it,
    /// which stops the rewrite with its error (components rewritten so far
    /// stay, with the same content). Runs under the merge lock; each
    /// rewritten component replaces its original in place. Returns how many
    /// were rewritten.
    pub fn rewrite_components(
        self: &Arc<Self>,
        needs: &dyn Fn(&ComponentReader) -> bool,
        check: &mut dyn FnMut(&[u8], &Entry) -> Result<()>,
    ) -> Result<usize> {
        let _g = self.merge_lock.lock();
        let disk = self.state.read().disk.clone();
        let mut done = 0;
        for old in disk.iter().filter(|c| needs(c)) {
            let om = old.meta();
            let mut meta = self.new_meta(om.level);
            meta.min_flush_id = om.min_flush_id;
            meta.max_flush_id = om.max_flush_id;
            meta.min_lsn = om.min_lsn;
            meta.max_lsn = om.max_lsn;
            let path = component_path(&self.cfg.dir, meta.id);
            let mut w =
                ComponentBuilder::create(&path, meta, self.cfg.writer.clone(), self.cfg.kind)?;
            self.attach_observer(&mut w);
            let copied: Result<()> = (|| {
                let mut it = old.iter(Bound::Unbounded, false)?;
                while let Some((k, e)) = it.next_entry()? {
                    check(&k, &e)?;
                    w.add(&k, e.kind, e.seq, &e.value)?;
                }
                Ok(())
            })();
            if let Err(e) = copied {
                w.abandon();
                return Err(e);
            }
            let Some(new) = w.finish(&self.cache)? else {
                continue;
            };
            let new = self.place(new)?;
            self.counters
                .bytes_merged
                .fetch_add(new.meta().file_bytes, Ordering::Relaxed);
            let _m = self.manifest_lock.lock();
            let new_disk = {
                let mut st = self.state.write();
                let d: Vec<Arc<ComponentReader>> = st
                    .disk
                    .iter()
                    .map(|c| {
                        if c.meta().id == om.id {
                            new.clone()
                        } else {
                            c.clone()
                        }
                    })
                    .collect();
                st.disk = Arc::new(d);
                st.disk.clone()
            };
            self.write_manifest(&new_disk)?;
            old.mark_obsolete();
            done += 1;
        }
        self.notify_changed();
        Ok(done)
    }
}
