//! An index's remote tier (Fusion, seed 004 ch. 6): components of the
//! levels the tier holds live in a bucket, and the index's MANIFEST lives
//! there too, replaced with conditional puts.
//!
//! - Open: read the bucket's MANIFEST, take the writer's place by putting
//!   it back with this process's token (conditional on the version read),
//!   then delete objects of the prefix the MANIFEST does not list (uploads
//!   of a flush or merge that crashed before its MANIFEST, components a
//!   finished merge replaced).
//! - Flush and merge: a component is written locally as always, uploaded
//!   whole (its deleted-key file first), reopened from the bucket, and its
//!   local file removed; then the MANIFEST names it. A crash before the
//!   MANIFEST leaves objects nobody lists (collected at the next open) and
//!   no visible change.
//! - A writer that lost its place (another process took the prefix) fails
//!   its next MANIFEST put with [`Error::RemoteConflict`] and stops.

use super::*;
use crate::lsm::kind::open_component_from;
use crate::storage::column_image::{ColumnImage, write_image};
use crate::storage::remote::{ObjectVersion, PutCondition, RemoteSource, RemoteTier};
use crate::storage::source::ComponentSource;
use std::collections::HashMap;

/// The remote tier of one open index: where, who writes, and the version
/// of the MANIFEST this process last put.
pub(super) struct RemoteState {
    pub(super) tier: RemoteTier,
    /// This process's token, written into every MANIFEST it puts.
    pub(super) writer: String,
    version: Mutex<Option<ObjectVersion>>,
}

/// What opening a remote tier found: the MANIFEST (if the index existed)
/// and the size of every object of the prefix.
pub(super) struct Opened {
    pub(super) state: RemoteState,
    pub(super) manifest: Option<Manifest>,
    pub(super) sizes: HashMap<String, u64>,
}

fn component_name(id: u64) -> String {
    format!("{id:016x}.sc")
}

fn companion_name(id: u64) -> String {
    format!("{id:016x}.dk.sc")
}

fn image_name(id: u64) -> String {
    format!("{id:016x}.col.sc")
}

/// The component id an object name stands for, if it is a component file.
fn component_id(name: &str) -> Option<u64> {
    let stem = name
        .strip_suffix(".dk.sc")
        .or_else(|| name.strip_suffix(".col.sc"))
        .or_else(|| name.strip_suffix(".sc"))?;
    u64::from_str_radix(stem, 16).ok()
}

impl RemoteState {
    /// Open the tier: read the MANIFEST, take the writer's place, collect
    /// the prefix's garbage. `dir` is the index's local directory, where a
    /// marker file (`REMOTE`) says the bucket has held its MANIFEST.
    pub(super) fn open(tier: RemoteTier, dir: &Path) -> Result<Opened> {
        let key = tier.key("MANIFEST");
        let url = tier.url_of("MANIFEST");
        let got = tier.store.get(&key)?;
        tier.counters.got(got.as_ref().map_or(0, |(b, _)| b.len()));
        let marker = dir.join("REMOTE");
        if got.is_none() && marker.exists() {
            // Starting empty would lose every component flushed there.
            return Err(Error::corrupt(
                &url,
                format!(
                    "the bucket holds no MANIFEST for this index, but this database put one there before ({}): the URL, endpoint or credentials point at another bucket, or its objects were deleted; fix the settings (to start the index empty instead, delete that file)",
                    marker.display()
                ),
            ));
        }
        let (mut manifest, version) = match got {
            Some((bytes, v)) => {
                let m: Manifest = serde_json::from_slice(&bytes)
                    .map_err(|e| Error::corrupt(&url, format!("unreadable manifest: {e}")))?;
                (Some(m), Some(v))
            }
            None => (None, None),
        };
        let state = RemoteState {
            writer: format!("{:016x}", rand::random::<u64>()),
            tier,
            version: Mutex::new(version),
        };
        // Take the writer's place: the same list, this process's token.
        let claim = match manifest.as_mut() {
            Some(m) => {
                m.writer = Some(state.writer.clone());
                serde_json::to_vec_pretty(&*m)
            }
            None => serde_json::to_vec_pretty(&Manifest {
                version: 1,
                next_id: 1,
                flush_count: 0,
                components: Vec::new(),
                lifetime: LifetimeCounters::default(),
                writer: Some(state.writer.clone()),
            }),
        }
        .map_err(|e| Error::Config(format!("encoding manifest: {e}")))?;
        state.put_manifest(claim)?;
        if !marker.exists() {
            write_atomic(&marker, state.tier.store.url().as_bytes())?;
        }
        // Garbage: component objects the MANIFEST does not list as remote.
        let keep: std::collections::HashSet<u64> = manifest
            .iter()
            .flat_map(|m| m.components.iter())
            .filter(|e| e.remote)
            .map(|e| e.id)
            .collect();
        let mut sizes = HashMap::new();
        let own = format!("{}/", state.tier.prefix);
        for o in state.tier.store.list(&state.tier.prefix)? {
            let Some(name) = o.key.strip_prefix(&own) else {
                continue;
            };
            match component_id(name) {
                Some(id) if !keep.contains(&id) => {
                    tracing::info!(
                        "removing unlisted object {}",
                        state.tier.url_of(name).display()
                    );
                    state.tier.store.delete(&o.key)?;
                    state.tier.counters.deleted();
                }
                _ => {
                    sizes.insert(name.to_owned(), o.size);
                }
            }
        }
        Ok(Opened {
            state,
            manifest,
            sizes,
        })
    }

    /// Put the MANIFEST `bytes` if the bucket still holds the one this
    /// process put last.
    pub(super) fn put_manifest(&self, bytes: Vec<u8>) -> Result<()> {
        let key = self.tier.key("MANIFEST");
        let mut v = self.version.lock();
        let cond = match v.clone() {
            Some(x) => PutCondition::Matches(x),
            None => PutCondition::Absent,
        };
        self.tier.counters.put(bytes.len() as u64);
        if let Some(nv) = self.tier.store.put_if(&key, bytes.clone(), cond)? {
            *v = Some(nv);
            return Ok(());
        }
        // A put retried after its first attempt landed fails its condition
        // against itself: the object is then exactly these bytes.
        if let Some((cur, cv)) = self.tier.store.get(&key)?
            && cur == bytes
        {
            *v = Some(cv);
            return Ok(());
        }
        Err(Error::RemoteConflict {
            url: self.tier.url_of("MANIFEST").display().to_string(),
        })
    }

    /// Upload the local component `c` (its deleted-key file and column
    /// image first); the image's size, if it has one.
    fn upload(&self, c: &ComponentReader) -> Result<Option<u64>> {
        let id = c.meta().id;
        let image = match self.tier.column_images {
            true => {
                let tmp = c.path().with_extension("col.tmp");
                let size = write_image(c.num_blocks(), |b, f| c.for_each_in_block(b, f), &tmp)?;
                if let Some(n) = size {
                    let put = self
                        .tier
                        .store
                        .put_file(&self.tier.key(&image_name(id)), &tmp);
                    let _ = std::fs::remove_file(&tmp);
                    put?;
                    self.tier.counters.put(n);
                }
                size
            }
            false => None,
        };
        if let Some(d) = c.companion() {
            self.tier
                .store
                .put_file(&self.tier.key(&companion_name(id)), d.path())?;
            self.tier.counters.put(d.meta().file_bytes);
        }
        self.tier
            .store
            .put_file(&self.tier.key(&component_name(id)), c.path())?;
        self.tier.counters.put(c.meta().file_bytes);
        Ok(image)
    }

    /// Open component `id` from the bucket, `size` bytes, its deleted-key
    /// file `dk_size` bytes if it has one, its column image `image_size`
    /// bytes if it has one, placed at `level`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn open_component(
        &self,
        id: u64,
        size: u64,
        dk_size: Option<u64>,
        image_size: Option<u64>,
        cache: &Arc<BlockCache>,
        kind: &TreeKind,
        level: u32,
    ) -> Result<Arc<ComponentReader>> {
        let source = |name: String, size: u64| -> Result<Box<dyn ComponentSource>> {
            Ok(Box::new(RemoteSource::open(
                self.tier.store.clone(),
                self.tier.counters.clone(),
                self.tier.key(&name),
                self.tier.url_of(&name),
                size,
            )?))
        };
        let companion = || match dk_size {
            Some(s) => source(companion_name(id), s),
            None => Err(Error::corrupt(
                self.tier.url_of(&companion_name(id)),
                "the component's deleted-key object is missing from the bucket",
            )),
        };
        let c = open_component_from(
            source(component_name(id), size)?,
            &companion,
            cache.clone(),
            kind,
            Some(level),
        )?;
        if let Some(n) = image_size {
            let name = image_name(id);
            // The image only speeds reads the component answers anyway: one
            // that cannot be read is reported and left unused.
            match ColumnImage::open(
                self.tier.store.clone(),
                self.tier.counters.clone(),
                self.tier.key(&name),
                self.tier.url_of(&name),
                n,
            ) {
                Ok(img) => c.set_image(Arc::new(img)),
                Err(e) => tracing::warn!("column image left unused: {e}"),
            }
        }
        Ok(c)
    }

    /// Open a component the MANIFEST lists as remote, its sizes from the
    /// listing made at open.
    pub(super) fn open_listed(
        &self,
        id: u64,
        level: u32,
        sizes: &HashMap<String, u64>,
        cache: &Arc<BlockCache>,
        kind: &TreeKind,
    ) -> Result<Arc<ComponentReader>> {
        let Some(&size) = sizes.get(&component_name(id)) else {
            return Err(Error::corrupt(
                self.tier.url_of(&component_name(id)),
                "component listed in the index MANIFEST is missing from the bucket; the prefix was modified or damaged",
            ));
        };
        let dk = sizes.get(&companion_name(id)).copied();
        let image = sizes.get(&image_name(id)).copied();
        self.open_component(id, size, dk, image, cache, kind, level)
    }
}

impl LsmTree {
    /// Where a newly written component goes: unchanged when local, or
    /// uploaded and reopened from the bucket when the remote tier holds
    /// its level (its local file then removed).
    pub(super) fn place(&self, r: Arc<ComponentReader>) -> Result<Arc<ComponentReader>> {
        let Some(rs) = &self.remote else {
            return Ok(r);
        };
        if r.is_remote() || !rs.tier.holds(r.meta().level) {
            return Ok(r);
        }
        let placed = self.to_remote(&r, r.meta().level);
        // The local file goes either way: uploaded, or not listed anywhere.
        r.mark_obsolete();
        placed
    }

    /// Component `c` (local) in the bucket at `level`; `c` itself is left
    /// as it is.
    fn to_remote(&self, c: &ComponentReader, level: u32) -> Result<Arc<ComponentReader>> {
        let Some(rs) = &self.remote else {
            return Err(Error::Config(format!(
                "index {} has no remote tier",
                self.cfg.name
            )));
        };
        let image = rs.upload(c)?;
        rs.open_component(
            c.meta().id,
            c.meta().file_bytes,
            c.companion().map(|d| d.meta().file_bytes),
            image,
            &self.cache,
            &self.cfg.kind,
            level,
        )
    }

    /// Component `c` placed at `level` without rewriting it: a second
    /// reader of the same file, or, when `level` is in the remote tier and
    /// `c` is not, an uploaded copy (the caller removes the local file once
    /// the MANIFEST no longer lists it).
    pub(super) fn reopen_at(
        &self,
        c: &Arc<ComponentReader>,
        level: u32,
    ) -> Result<Arc<ComponentReader>> {
        match &self.remote {
            Some(rs) if c.is_remote() => {
                let r = rs.open_component(
                    c.meta().id,
                    c.meta().file_bytes,
                    c.companion().map(|d| d.meta().file_bytes),
                    None,
                    &self.cache,
                    &self.cfg.kind,
                    level,
                )?;
                if let Some(img) = c.image() {
                    r.set_image(img.clone());
                }
                Ok(r)
            }
            Some(rs) if rs.tier.holds(level) => self.to_remote(c, level),
            _ => open_component_at(c.path(), self.cache.clone(), &self.cfg.kind, Some(level)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::component_id;

    #[test]
    fn object_names() {
        assert_eq!(component_id("000000000000002a.sc"), Some(42));
        assert_eq!(component_id("000000000000002a.dk.sc"), Some(42));
        assert_eq!(component_id("000000000000002a.col.sc"), Some(42));
        assert_eq!(component_id("MANIFEST"), None);
        assert_eq!(component_id("zz.sc"), None);
    }
}
