//! Where a component file's bytes come from: the read side of a storage
//! backend. A component reader asks its source for ranges (the footer,
//! index, bloom, meta and aux blocks at open; data blocks on a cache miss)
//! and, when the backend can map the whole file, for the mapping, from
//! which uncompressed blocks are read in place. [`LocalFile`] is a file on
//! the local file system, memory-mapped; `remote::RemoteSource` an object
//! in a bucket (ranged GETs, no mapping).

use crate::error::{Error, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The bytes of one immutable component file.
pub trait ComponentSource: Send + Sync + std::fmt::Debug {
    /// Where the file lives (for messages).
    fn path(&self) -> &Path;
    /// Size in bytes.
    fn len(&self) -> u64;
    /// Whether the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `len` bytes at `off`; a range past the end is `Error::Corrupt`.
    fn read_at(&self, off: u64, len: usize) -> Result<Vec<u8>>;
    /// The whole file as one slice, if the backend maps it.
    fn mapped(&self) -> Option<&[u8]>;
    /// Delete the file (the component was merged away and is unreferenced).
    fn remove(&self) -> std::io::Result<()>;
    /// Whether the file is in a bucket rather than on the local disk.
    fn is_remote(&self) -> bool {
        false
    }
    /// The caller is about to read `[off, end)` in order (the blocks of a
    /// chunk a block range index chose): a source that fetches ahead may
    /// fetch that much at the first read. Only advice.
    fn will_read(&self, _off: u64, _end: u64) {}
}

/// A component file on the local file system, mapped read-only when
/// possible.
#[derive(Debug)]
pub struct LocalFile {
    path: PathBuf,
    file: File,
    size: u64,
    map: Option<memmap2::Mmap>,
}

impl LocalFile {
    /// Open `path` for reading and map it.
    pub fn open(path: &Path) -> Result<LocalFile> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let map = map_file(&file).filter(|m| m.len() as u64 == size);
        Ok(LocalFile {
            path: path.to_path_buf(),
            file,
            size,
            map,
        })
    }
}

/// Map a component file read-only.
fn map_file(file: &File) -> Option<memmap2::Mmap> {
    // SAFETY: a mapping is sound as long as nobody modifies or truncates the
    // file while it is mapped. Component files are immutable: they are
    // written under a temporary name, fsynced and renamed, and never opened
    // for writing again; when obsolete they are unlinked, which leaves an
    // existing mapping valid. Another process writing into a database
    // directory is outside what Silt supports (as for every mmap-based
    // engine); reads are still checksummed, so a changed block is reported
    // as corrupt rather than trusted.
    unsafe { memmap2::Mmap::map(file) }.ok()
}

impl ComponentSource for LocalFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> u64 {
        self.size
    }

    fn read_at(&self, off: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, off).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::corrupt(
                    &self.path,
                    format!("truncated: cannot read {len} bytes at offset {off}"),
                )
            } else {
                Error::io(&self.path, e)
            }
        })?;
        Ok(buf)
    }

    fn mapped(&self) -> Option<&[u8]> {
        self.map.as_deref()
    }

    fn remove(&self) -> std::io::Result<()> {
        std::fs::remove_file(&self.path)
    }
}
