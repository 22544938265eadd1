//! Index DDL on an open dataset: bulk-building a new secondary index from
//! the primary, and dropping one.

use super::*;

impl Dataset {
    /// Build a new secondary index over the existing records (bulk load of
    /// sorted entries) and start maintaining it. The caller holds the DDL lock
    /// exclusively (writers hold it shared): writers wait. Returns the definition with
    /// its assigned id; the caller records it in the catalog.
    pub(crate) fn add_index(&self, mut def: IndexDef) -> Result<IndexDef> {
        def.validate()?;
        if !def.kind.imp().has_tree() {
            return self.add_embedded_index(def);
        }
        let cur = self.indexes.read().clone();
        if cur.defs.iter().any(|d| d.name == def.name) {
            return Err(Error::IndexExists {
                dataset: self.name.clone(),
                index: def.name,
            });
        }
        if def.options.unique {
            self.check_no_duplicates(&def)?;
        }
        // Never reuse an id: log records of a dropped index may still be in
        // the log (the caller passes the highest id ever used in `def.id`).
        def.id = cur.defs.iter().map(|d| d.id).max().unwrap_or(0).max(def.id) + 1;
        // Every record below this LSN is in the primary; log records for the
        // new index only come after it.
        let mark = self.txn.wal.end_lsn();
        let mut trees = Vec::with_capacity(self.partitions.len());
        let mut count_def = (*self.def()).clone();
        count_def.indexes = cur.defs.clone();
        count_def.indexes.push(def.clone());
        for (p, part) in self.partitions.iter().enumerate() {
            let pdir = self.dir.join(format!("p{p}")).join(&def.name);
            if pdir.exists() {
                std::fs::remove_dir_all(&pdir).map_err(|e| Error::io(&pdir, e))?;
            }
            if p == 0 {
                remove_remote(&self.def(), &self.dir_name(), Some(&def.name))?;
            }
            let tree = Self::open_index_tree(
                &count_def,
                &self.dir,
                p as u32,
                &def,
                &self.cache,
                self.sync,
            )?;
            let snap = part.primary.snapshot();
            let mut scan = part
                .primary
                .scan(&snap, Bound::Unbounded, Bound::Unbounded, false)?;
            let mut keys: Vec<(Vec<u8>, u64, Vec<u8>)> = Vec::new();
            while let Some((pk, e)) = scan.next_entry()? {
                let rec = value::decode_value(&e.value)?;
                let ents = def.entries(&rec, &pk).map_err(|err| {
                    let shown = value::decode_key(&pk)
                        .map(|k| value::key_to_string(&k))
                        .unwrap_or_default();
                    Error::invalid(
                        None,
                        format!("cannot build index `{}`: record {shown}: {err}", def.name),
                    )
                })?;
                keys.extend(ents.into_iter().map(|(k, v)| (k, e.seq, v)));
            }
            // Eager and lazy: one posting list per value; value lists: one
            // fragment per key.
            keys = def.kind.imp().bulk_group(&def, keys)?;
            keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            keys.dedup_by(|a, b| a.0 == b.0);
            tree.bulk_load(
                keys.into_iter().map(|(k, seq, v)| (k, Entry::put(seq, v))),
                mark,
            )?;
            tree.set_log_sync(self.txn.clone());
            trees.push(tree);
        }
        for t in &trees {
            self.group.add_tree(t.clone());
            self.bg.schedule_merge(t.clone());
        }
        let mut next = IndexSet {
            defs: cur.defs.clone(),
            trees: cur.trees.clone(),
        };
        next.defs.push(def.clone());
        next.trees.push(trees);
        *self.indexes.write() = Arc::new(next);
        Ok(def)
    }

    /// Stop maintaining a secondary index and delete its files (the
    /// caller holds the DDL lock exclusively).
    pub(crate) fn remove_index(&self, name: &str) -> Result<()> {
        let cur = self.indexes.read().clone();
        let Some(i) = cur.defs.iter().position(|d| d.name == name) else {
            return Err(Error::NoSuchIndex {
                dataset: self.name.clone(),
                index: name.to_owned(),
            });
        };
        let mut next = IndexSet {
            defs: cur.defs.clone(),
            trees: cur.trees.clone(),
        };
        next.defs.remove(i);
        let trees = next.trees.remove(i);
        self.sync_recency_hooks(&next.defs);
        *self.indexes.write() = Arc::new(next);
        for t in &trees {
            self.group.remove_tree(t);
        }
        self.bg.wait_idle();
        drop(trees);
        drop(cur);
        remove_remote(&self.def(), &self.dir_name(), Some(name))?;
        for p in 0..self.partitions.len() {
            let pdir = self.dir.join(format!("p{p}")).join(name);
            if pdir.exists() {
                std::fs::remove_dir_all(&pdir).map_err(|e| Error::io(&pdir, e))?;
            }
        }
        Ok(())
    }
}
