//! [`ObjectBackend`]: one bucket and key prefix of an `object_store`
//! store, seen as the core's `RemoteStore`.

use futures::StreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::memory::InMemory;
use object_store::path::Path as ObjPath;
use object_store::{
    BackoffConfig, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
    UpdateVersion,
};
use silt::Error;
use silt::storage::remote::{ObjectInfo, ObjectVersion, PutCondition, RemoteStore};
use std::future::Future;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

type Result<T> = silt::Result<T>;

/// How requests are made: retries of transient failures (5xx, timeouts,
/// dropped connections) with exponential backoff, and the part size of
/// multipart uploads.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Retries of one request before its error is returned.
    pub max_retries: usize,
    /// No retry starts later than this after the first attempt.
    pub retry_timeout: Duration,
    /// The first backoff; each next one is twice as long, up to `max_backoff`.
    pub init_backoff: Duration,
    pub max_backoff: Duration,
    /// Files larger than this are uploaded in parts of this size (S3's
    /// minimum part is 5 MiB); memory held by an upload is one part.
    pub part_bytes: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_retries: 10,
            retry_timeout: Duration::from_secs(180),
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(5),
            part_bytes: 8 << 20,
        }
    }
}

/// A bucket and key prefix of an object store.
#[derive(Debug)]
pub struct ObjectBackend {
    /// The URL without its query (which may carry settings).
    url: String,
    store: Arc<dyn ObjectStore>,
    /// Key prefix inside the bucket, `""` or `a/b`.
    base: String,
    part_bytes: usize,
}

/// The runtime the requests run on (two worker threads: requests are I/O).
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("silt-objstore")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| Error::Config(format!("cannot start the object storage runtime: {e}")))
}

/// A request running on the runtime, its result to come over a channel.
///
/// The calling thread waits on a plain channel, never by polling a tokio
/// `JoinHandle`: the callers include tasks of the server's query runtime,
/// and a `JoinHandle` polled there honours that task's cooperative budget.
/// Once the budget is spent, tokio defers the wake-up until the task yields
/// to its scheduler, which a thread blocked here never does: a full-table
/// scan of a dataset in a bucket hung that way (seen in `silt serve` under
/// DataFusion, 2026-12-07).
struct Request<T>(std::sync::mpsc::Receiver<T>);

fn start<T: Send + 'static>(f: impl Future<Output = T> + Send + 'static) -> Result<Request<T>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime()?.spawn(async move {
        let _ = tx.send(f.await);
    });
    Ok(Request(rx))
}

impl<T> Request<T> {
    fn finish(self, url: &str) -> Result<T> {
        self.0.recv().map_err(|_| Error::Remote {
            url: url.to_owned(),
            reason:
                "the request's task ended without an answer (it panicked or the runtime stopped)"
                    .to_owned(),
        })
    }
}

/// Run `f` on the runtime and wait for it from this thread (which may be
/// a plain thread or a task of another runtime).
fn wait<T: Send + 'static>(url: &str, f: impl Future<Output = T> + Send + 'static) -> Result<T> {
    start(f)?.finish(url)
}

impl ObjectBackend {
    /// Open `url`: `s3://bucket/prefix[?key=value&...]` (keys as the
    /// `AWS_*` variables without `AWS_`, lower case: `endpoint`, `region`,
    /// `allow_http`...; credentials belong in the environment, not in a URL
    /// the catalog keeps) or `memory://name`.
    pub fn open(url: &str, settings: &Settings) -> Result<ObjectBackend> {
        let (plain, query) = match url.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (url, None),
        };
        let (scheme, rest) = plain.split_once("://").ok_or_else(|| {
            Error::Config(format!(
                "`{url}` is not an object storage URL; write it as s3://bucket/prefix"
            ))
        })?;
        let (store, base): (Arc<dyn ObjectStore>, String) = match scheme
            .to_ascii_lowercase()
            .as_str()
        {
            "memory" => (Arc::new(InMemory::new()), String::new()),
            "s3" | "s3a" => {
                let (bucket, base) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(Error::Config(format!(
                        "`{plain}` names no bucket; write it as s3://bucket/prefix"
                    )));
                }
                (
                    s3(bucket, query, settings, plain)?,
                    base.trim_matches('/').to_owned(),
                )
            }
            other => {
                return Err(Error::Config(format!(
                    "`{plain}`: no object store for `{other}://`; use s3://bucket/prefix (Amazon S3 or an S3-compatible server) or memory://name"
                )));
            }
        };
        Ok(ObjectBackend {
            url: plain.trim_end_matches('/').to_owned(),
            store,
            base,
            part_bytes: settings.part_bytes.max(5 << 20),
        })
    }

    fn path(&self, key: &str) -> ObjPath {
        if self.base.is_empty() {
            ObjPath::from(key)
        } else {
            ObjPath::from(format!("{}/{key}", self.base))
        }
    }

    fn err(&self, key: &str, e: impl std::fmt::Display) -> Error {
        Error::Remote {
            url: format!("{}/{key}", self.url),
            reason: e.to_string(),
        }
    }

    /// Upload in parts, up to [`PARTS_IN_FLIGHT`] of them at once (so a
    /// large component is not paced by one request's latency), each part's
    /// bytes held only until its request ends.
    fn put_parts(&self, key: &str, file: &mut std::fs::File) -> Result<()> {
        let store = self.store.clone();
        let loc = self.path(key);
        let url = format!("{}/{key}", self.url);
        let mut up = wait(&url, async move { store.put_multipart(&loc).await })?
            .map_err(|e| self.err(key, e))?;
        let mut flying = std::collections::VecDeque::new();
        let mut sent = || -> Result<()> {
            let mut buf = vec![0u8; self.part_bytes];
            loop {
                if flying.len() >= PARTS_IN_FLIGHT {
                    self.part_done(key, &url, flying.pop_front())?;
                }
                let n = read_full(file, &mut buf).map_err(|e| self.err(key, e))?;
                if n == 0 {
                    break;
                }
                flying.push_back(start(up.put_part(PutPayload::from(buf[..n].to_vec())))?);
            }
            while let Some(h) = flying.pop_front() {
                self.part_done(key, &url, Some(h))?;
            }
            Ok(())
        };
        if let Err(e) = sent() {
            let _ = wait(&url, async move { up.abort().await });
            return Err(e);
        }
        wait(&url, async move { up.complete().await })?.map_err(|e| self.err(key, e))?;
        Ok(())
    }

    /// Wait for one part's request.
    fn part_done(
        &self,
        key: &str,
        url: &str,
        part: Option<Request<object_store::Result<()>>>,
    ) -> Result<()> {
        let Some(part) = part else { return Ok(()) };
        part.finish(url)?.map_err(|e| self.err(key, e))
    }
}

/// Parts of one multipart upload in flight at once: 4 x 8 MiB of memory at
/// most per upload.
const PARTS_IN_FLIGHT: usize = 4;

/// Fill `buf` from `f` as far as the file goes; the bytes read.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// An S3 client for `bucket`: the environment's settings, then the URL's.
fn s3(
    bucket: &str,
    query: Option<&str>,
    settings: &Settings,
    url: &str,
) -> Result<Arc<dyn ObjectStore>> {
    let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
    let mut endpoint = std::env::var("AWS_ENDPOINT_URL")
        .or_else(|_| std::env::var("AWS_ENDPOINT"))
        .ok();
    let mut settings = settings.clone();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, "true"));
        // Silt's own: how long a request is retried.
        let number = || {
            v.parse::<u64>().map_err(|_| {
                Error::Config(format!("`{url}`: `{k}` takes a whole number, not `{v}`"))
            })
        };
        match k {
            "max_retries" => {
                settings.max_retries = number()? as usize;
                continue;
            }
            "retry_timeout_s" => {
                settings.retry_timeout = Duration::from_secs(number()?);
                continue;
            }
            _ => {}
        }
        let key: AmazonS3ConfigKey = k.to_ascii_lowercase().parse().map_err(|_| {
            Error::Config(format!(
                "`{url}`: unknown setting `{k}`; use the names of the AWS_* variables without AWS_ (endpoint, region, allow_http, ...), max_retries or retry_timeout_s"
            ))
        })?;
        if key == AmazonS3ConfigKey::Endpoint {
            endpoint = Some(v.to_owned());
        }
        b = b.with_config(key, v);
    }
    // A plain-HTTP endpoint (a local S3-compatible server) is meant.
    if endpoint
        .as_deref()
        .is_some_and(|e| e.starts_with("http://"))
    {
        b = b.with_allow_http(true);
    }
    if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err() {
        b = b.with_region("us-east-1");
    }
    b = b.with_retry(RetryConfig {
        backoff: BackoffConfig {
            init_backoff: settings.init_backoff,
            max_backoff: settings.max_backoff,
            base: 2.0,
        },
        max_retries: settings.max_retries,
        retry_timeout: settings.retry_timeout,
    });
    let s = b
        .build()
        .map_err(|e| Error::Config(format!("`{url}`: {e}")))?;
    Ok(Arc::new(s))
}

impl RemoteStore for ObjectBackend {
    fn url(&self) -> &str {
        &self.url
    }

    fn put_file(&self, key: &str, path: &Path) -> Result<()> {
        let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
        if len > self.part_bytes as u64 {
            return self.put_parts(key, &mut f);
        }
        let mut bytes = Vec::with_capacity(len as usize);
        f.read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
        let store = self.store.clone();
        let loc = self.path(key);
        wait(&self.url, async move {
            store.put(&loc, PutPayload::from(bytes)).await
        })?
        .map_err(|e| self.err(key, e))?;
        Ok(())
    }

    fn put_if(
        &self,
        key: &str,
        bytes: Vec<u8>,
        cond: PutCondition,
    ) -> Result<Option<ObjectVersion>> {
        let mode = match cond {
            PutCondition::Absent => PutMode::Create,
            PutCondition::Matches(v) => PutMode::Update(UpdateVersion {
                e_tag: Some(v.0),
                version: None,
            }),
        };
        let store = self.store.clone();
        let loc = self.path(key);
        let r = wait(&self.url, async move {
            store
                .put_opts(&loc, PutPayload::from(bytes), PutOptions::from(mode))
                .await
        })?;
        match r {
            Ok(p) => match p.e_tag {
                Some(t) => Ok(Some(ObjectVersion(t))),
                None => Err(self.err(
                    key,
                    "the store returned no ETag, so conditional puts cannot work with it",
                )),
            },
            Err(object_store::Error::Precondition { .. })
            | Err(object_store::Error::AlreadyExists { .. }) => Ok(None),
            Err(e) => Err(self.err(key, e)),
        }
    }

    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, ObjectVersion)>> {
        let store = self.store.clone();
        let loc = self.path(key);
        let r = wait(&self.url, async move {
            let g = store.get(&loc).await?;
            let tag = g.meta.e_tag.clone();
            let b = g.bytes().await?;
            Ok::<_, object_store::Error>((b, tag))
        })?;
        match r {
            Ok((b, tag)) => Ok(Some((b.to_vec(), ObjectVersion(tag.unwrap_or_default())))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err(key, e)),
        }
    }

    fn get_range(&self, key: &str, off: u64, len: usize) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let store = self.store.clone();
        let loc = self.path(key);
        let end = off + len as u64;
        let b = wait(
            &self.url,
            async move { store.get_range(&loc, off..end).await },
        )?
        .map_err(|e| self.err(key, e))?;
        Ok(b.to_vec())
    }

    fn delete(&self, key: &str) -> Result<()> {
        let store = self.store.clone();
        let loc = self.path(key);
        match wait(&self.url, async move { store.delete(&loc).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err(key, e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        let store = self.store.clone();
        let loc = self.path(prefix);
        let metas = wait(&self.url, async move {
            let mut s = store.list(Some(&loc));
            let mut out = Vec::new();
            while let Some(m) = s.next().await {
                out.push(m?);
            }
            Ok::<_, object_store::Error>(out)
        })?
        .map_err(|e| self.err(prefix, e))?;
        let strip = if self.base.is_empty() {
            String::new()
        } else {
            format!("{}/", self.base)
        };
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let full = m.location.to_string();
                let key = full.strip_prefix(&strip)?.to_owned();
                Some(ObjectInfo { key, size: m.size })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(name: &str) -> ObjectBackend {
        ObjectBackend::open(&format!("memory://{name}"), &Settings::default()).unwrap()
    }

    /// A request made from a tokio task that has spent its cooperative
    /// budget finishes (it hung before: the wait polled a `JoinHandle`,
    /// whose wake-up tokio then deferred to a yield that never came).
    #[test]
    fn requests_from_a_task_with_its_budget_spent_finish() {
        let b = Arc::new(mem("budget"));
        b.put_if("k", b"0123456789".to_vec(), PutCondition::Absent)
            .unwrap()
            .unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let task_b = b.clone();
        rt.spawn(async move {
            // tokio's budget is 128 units a poll; spend all of them
            // without yielding.
            for _ in 0..128 {
                tokio::task::consume_budget().await;
            }
            let _ = tx.send(task_b.get_range("k", 2, 3));
        });
        let got = rx.recv_timeout(Duration::from_secs(30));
        rt.shutdown_background();
        let got = got.expect("a request from a task with its budget spent did not finish in 30 s");
        assert_eq!(got.unwrap(), b"234");
    }

    #[test]
    fn conditional_puts_let_one_writer_win() {
        let b = mem("cond");
        let v1 = b
            .put_if("m", b"one".to_vec(), PutCondition::Absent)
            .unwrap()
            .unwrap();
        // Absent again: someone is there.
        assert!(
            b.put_if("m", b"x".to_vec(), PutCondition::Absent)
                .unwrap()
                .is_none()
        );
        let v2 = b
            .put_if("m", b"two".to_vec(), PutCondition::Matches(v1.clone()))
            .unwrap()
            .unwrap();
        // The old version no longer matches.
        assert!(
            b.put_if("m", b"three".to_vec(), PutCondition::Matches(v1))
                .unwrap()
                .is_none()
        );
        let (bytes, v) = b.get("m").unwrap().unwrap();
        assert_eq!((bytes, v), (b"two".to_vec(), v2));
        assert_eq!(b.get("absent").unwrap(), None);
    }

    #[test]
    fn files_ranges_listing_and_deletes() {
        let b = mem("files");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        b.put_file("a/p0/x.sc", &p).unwrap();
        b.put_file("a/p1/y.sc", &p).unwrap();
        b.put_file("ab/z.sc", &p).unwrap();
        assert_eq!(b.get_range("a/p0/x.sc", 100, 50).unwrap(), data[100..150]);
        assert_eq!(b.get_range("a/p0/x.sc", 0, 0).unwrap(), Vec::<u8>::new());
        // A prefix is a directory: `a` does not list `ab/...`.
        let mut keys: Vec<String> = b.list("a").unwrap().into_iter().map(|o| o.key).collect();
        keys.sort();
        assert_eq!(keys, vec!["a/p0/x.sc", "a/p1/y.sc"]);
        assert!(b.list("a").unwrap().iter().all(|o| o.size == 10_000));
        b.delete("a/p0/x.sc").unwrap();
        b.delete("a/p0/x.sc").unwrap(); // absent: not an error
        assert_eq!(b.list("a").unwrap().len(), 1);
        let e = b.get_range("a/p0/x.sc", 0, 10).unwrap_err();
        assert!(e.to_string().contains("memory://files/a/p0/x.sc"), "{e}");
    }

    #[test]
    fn urls_are_checked() {
        let s = Settings::default();
        for (url, want) in [
            ("nowhere", "not an object storage URL"),
            ("ftp://h/x", "no object store for `ftp://`"),
            ("s3:///prefix", "names no bucket"),
            ("s3://b/p?colour=blue", "unknown setting `colour`"),
            (
                "s3://b/p?max_retries=many",
                "`max_retries` takes a whole number",
            ),
        ] {
            let e = ObjectBackend::open(url, &s).unwrap_err();
            assert!(e.to_string().contains(want), "{url}: {e}");
        }
        // The query never shows in messages.
        let b = ObjectBackend::open(
            "s3://b/p/?endpoint=http://127.0.0.1:1&access_key_id=k&secret_access_key=hush",
            &s,
        )
        .unwrap();
        assert_eq!(b.url(), "s3://b/p");
    }
}
