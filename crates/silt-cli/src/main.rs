//! `silt`: the command-line tool of the Silt LSM database.

mod commands;
mod demo;
mod describe;
mod design;
mod error;
mod index;
mod load;
mod query;
mod stats;
mod user;
mod util;
mod volume;

use clap::{Parser, Subcommand};
use error::{CliError, CliResult};
use silt::lsm::policy::MergePolicy;
use std::path::PathBuf;
use std::process::ExitCode;

// Block reads allocate and free a few KiB per cache miss; glibc's malloc
// showed as a quarter of a random-lookup profile, mimalloc a few percent.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MAIN_HELP: &str = "\
Examples:
  silt demo                                   # generate, load and query 200,000 sample records
  silt create-dataset tweets --key id --field id:int --field lat:double
  silt load tweets tweets.jsonl
  silt get tweets 42
  silt scan tweets --from 100 --to 200 --limit 10
  silt create-index tweets by_user --field user_id
  silt query tweets --index by_user --eq 42
  silt create-index places loc --type rtree --field loc
  silt query places --index loc --near 2.35,48.86 --k 5
  silt stats
  silt design --roots customer --workload queries.sql   # Synergy's views for a workload
  silt serve                                  # SQL over the PostgreSQL protocol (:5433) and HTTP (:8080)
  silt volume up --dir /tmp/vol               # a 3-replica block volume, NBD on 127.0.0.1:10809

Exit codes: 0 success; 1 not found (record, dataset, database) or an engine
failure (I/O, corrupt file); 2 usage or input error (bad arguments, invalid
records, database already open in another process).";

const SERVE_HELP: &str = "\
Serves SQL (see silt-sql: CREATE TABLE, CREATE INDEX ... USING rtree, INSERT,
UPSERT INTO, SELECT with ST_* functions, DELETE, COMPACT) to other programs
until Ctrl-C or SIGTERM, then lets running statements finish (up to 10 s),
closes and checkpoints the database. The directory is created if missing.

PostgreSQL wire protocol (--pg): psql, psycopg, JDBC and other drivers connect
as to PostgreSQL; prepared statements with $1 parameters work. BEGIN ...
COMMIT/ROLLBACK are real transactions over any tables. Errors carry SQLSTATE
codes (42601 syntax, 42P01 undefined table, 23505 duplicate key, 40001
conflict, 42501 permission denied, 53000 busy, 57014 timeout).

HTTP (--http): POST /query/service with the statement as the body, as a form
field statement=..., or as JSON {\"statement\": \"...\"}; the answer is
{\"requestID\", \"status\", \"results\": [rows], \"errors\": [{\"code\", \"msg\"}],
\"metrics\"} (AsterixDB's shape). With Accept: application/x-ndjson (or
?format=ndjson) rows stream as one JSON object per line. GET /health,
GET /stats (as `silt stats --json`).

Security (docs/security.md): with no user (see `silt user --help`) nobody is
asked for a password, so the server listens on loopback addresses only. Once a
user exists, clients log in (PostgreSQL: SCRAM-SHA-256; HTTP: Basic, or a
bearer token from POST /auth/token) and each statement runs with the user's
privileges (GRANT/REVOKE); then --pg/--http may be any address. --tls-cert and
--tls-key turn on TLS for both (HTTP becomes HTTPS only; PostgreSQL clients
use sslmode=require or verify-full); --tls-required refuses plain PostgreSQL
connections. Statements that touch files on the server (CREATE EXTERNAL
TABLE, COPY ... TO 'file') are refused unless --server-files DIR allows them,
for admins, below DIR.

At most --max-concurrent statements run at once; up to --queue more wait for
a slot (then: \"server busy\"); a statement running longer than --timeout is
cancelled (its work stops; a session may lower its own limit with SET
statement_timeout = '5s', an HTTP request with \"timeout\": \"5s\"), as is one
whose client sends a cancel request (psql's Ctrl-C). Resource bounds (below)
cap the memory of queries, the values functions build, results, requests,
connections and idle sessions, so that a hostile or mistaken query gets an
error naming the flag instead of exhausting the server. Addresses take
HOST:PORT, :PORT, or `off`.

Examples:
  silt serve --db ./mydb
  psql -h 127.0.0.1 -p 5433 -c 'CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR)'
  psql -h 127.0.0.1 -p 5433 -c \"INSERT INTO t VALUES (1, 'a'), (2, 'b')\"
  curl -d 'SELECT * FROM t WHERE id > 1' http://127.0.0.1:8080/query/service
  curl -H 'Accept: application/x-ndjson' -d 'SELECT * FROM t' http://127.0.0.1:8080/query/service
  curl --data-urlencode 'statement=SELECT count(*) FROM t' http://127.0.0.1:8080/query/service
  silt --db ./mydb user add admin --admin
  silt serve --db ./mydb --pg 0.0.0.0:5433 --http off --tls-cert cert.pem --tls-key key.pem
  psql 'host=db.example port=5433 user=admin sslmode=verify-full sslrootcert=ca.pem'";

#[derive(Parser, Debug)]
#[command(
    name = "silt",
    version,
    about = "Silt: an embeddable LSM database. Create datasets, load JSON Lines or CSV, query and inspect them.",
    after_help = MAIN_HELP
)]
struct Cli {
    /// Database directory.
    #[arg(
        long,
        global = true,
        env = "SILT_DB",
        default_value = "./silt-data",
        value_name = "PATH",
        display_order = 100
    )]
    db: PathBuf,

    /// Size of the block cache, in MiB.
    #[arg(
        long,
        global = true,
        value_name = "N",
        default_value_t = 256,
        display_order = 101
    )]
    cache_mb: u64,

    /// When a write is acknowledged: `sync` (after its commit is fsynced to the
    /// log; nothing acknowledged is ever lost), `batched(MS)` (log fsynced at
    /// most every MS milliseconds: an OS crash may lose the last MS of
    /// acknowledged writes), `none` (log never fsynced: for bulk loads you can
    /// redo; an OS crash may lose everything since the last flush).
    #[arg(
        long,
        global = true,
        value_name = "MODE",
        default_value = "sync",
        display_order = 102
    )]
    durability: silt::Durability,

    #[command(subcommand)]
    command: Command,
}

const CREATE_HELP: &str = "\
Field types: any, bool, int, double, string, binary, point, rectangle, polygon,
geometry (aliases such as integer, float, text, bytes are accepted). Undeclared
fields are stored as given.

Merge policies (--policy):
  prefix(MAX_MERGABLE_SIZE,MAX_TOLERANCE_COUNT)  default prefix(1GB,5) (AsterixDB)
  constant(K)          merge everything once there are K components
  binomial(K)          Bigtable-style binomial schedule keeping at most K components
  tiered(B)            size-tiered with size ratio B
  concurrent | concurrent(K,C,D,LAMBDA)   HBase-style exploring policy
  leveled | leveled(L0_TRIGGER,FANOUT[,TARGET_FILE_SIZE[,L1_SIZE]])   RocksDB-style
  no-merge             never merge
Sizes take B, KB, MB, GB or TB suffixes (binary multiples).

--index NAME:FIELD[,FIELD...] creates a btree secondary index right after the
dataset; --index NAME:TYPE:FIELD one of another type (rtree, keyword, ngram)
with its default options. Both use the dataset's merge policy; for other
options use `silt create-index` (see its --help).

Records that expire: --ttl-expiry FIELD (each record's expiry), or
--ttl-time FIELD with --ttl-after N (a life past its time). Reads never show
an expired record; a background sweep deletes it (through the primary key if
it leads with the field, else a btree index leading with it, else a full
scan once a minute: index the field on a large dataset). `silt stats` shows
the clock and what the sweeps did.

Examples:
  silt create-dataset tweets --key id --field id:int --field text:string --field lat:double --field lon:double
  silt create-dataset sessions --key id --field id:string,until:timestamp --ttl-expiry until --index by_until:until
  silt create-dataset readings --key sensor,t --field sensor:string,t:int --ttl-time t --ttl-after 86400
  silt create-dataset people --key id --field id:int --field age:int --index by_age:age --index by_city_age:city,age
  silt create-dataset events --key user,ts --field user:string --field ts:int --partitions 4 --policy 'tiered(4)'
  silt create-dataset places --key id --field id:int,loc:point,name:string --index loc:rtree:loc --index words:keyword:name
  silt create-dataset logs --key id --memory-mb 128 --policy 'leveled(4,10,64MB)' --compression zstd
  silt create-dataset archive --key id --policy 'leveled' --remote s3://my-bucket/silt --remote-level 2";

const LOAD_HELP: &str = "\
JSON Lines: one JSON object per line. CSV: a header row names the fields; cells
are converted to the dataset's declared field types, undeclared cells become an
int, a double or a string. A bad record does not stop the load: the first 10
failures are reported as `line N: <error>`, the rest are counted. The exit code
is non-zero only if no record could be loaded. The format is guessed from the
file extension (.csv is CSV, anything else JSON Lines) unless --format is given.

Examples:
  silt load tweets tweets.jsonl
  silt load tweets tweets.csv --mode upsert
  zcat tweets.jsonl.gz | silt load tweets - --batch-report 100000";

const GET_HELP: &str = "\
Key values are JSON literals when they parse as one (42 is an int, 2.5 a
double, \"a\" or a a string); a field declared string takes the text as it is.
Give one value per primary key field, in key order. Exits with 1 if the record
does not exist.

Examples:
  silt get tweets 42
  silt get events alice 1700000000";

const SCAN_HELP: &str = "\
Records are printed as JSON Lines in primary key order; a summary (records,
milliseconds) goes to standard error. --from and --to are inclusive; with a
composite key they may give a prefix (--to alice includes every key (alice, ...)).

Examples:
  silt scan tweets --limit 10
  silt scan tweets --from 1000 --to 2000
  silt scan events --from alice --to alice > alice.jsonl";

const CREATE_INDEX_HELP: &str = "\
Index types (--type):
  btree     LSM B+-tree on one field or a composite of fields (entries
            <field values, primary key>, no uniqueness): equality, prefix and
            range queries (`silt query --eq/--from/--to`)
  rtree     LSM R-tree on one geometry field (declared point, rectangle,
            polygon or geometry; GeoJSON, WKT and [lon, lat] values are
            converted when loaded): intersection, distance, k-nearest and
            spatial join queries (`--bbox`, `--intersects`, `--near`, `--join`).
            Entries are ordered by the Hilbert value of each geometry's centre
            in --space (default the lon/lat world -180,-90,180,90; geometries
            outside it are still found)
  keyword   LSM inverted index of the words of a text field (runs of letters
            and digits, case-insensitive): `--text` finds records with all (or
            any) of the words
  ngram     LSM inverted index of the n-grams (--gram N letters, default 3) of
            a text field: `--text` finds records containing a substring
  brin      block range index: no index tree; the primary index's disk
            components carry the min and max of the field per data block.
            `--eq`/`--from`/`--to` (and SQL range predicates) read only the
            blocks whose range overlaps. Nearly free to keep; prunes well
            when the field follows the key or arrival order (times, ids).
            With --chunk-size (e.g. 4M, 16M) it keeps one (min, max) per
            chunk of blocks instead (Fusion's block range index), as an
            interval tree or, with --form key-value, a min-keyed and a
            max-keyed copy: much smaller, coarser pruning

LevelDB++ indexes for the K most recent matches (`silt query --recent --eq V
--k K`, or --from A --to B), one field each; recency is the order of writes:
  embedded  no index tree: the primary index's disk components carry a bloom
            filter (--bits-per-key, default 100) and a min/max zone map of the
            field per data block, and its memory component a sorted set.
            Cheapest to maintain; a lookup reads the newest components first
            and stops once the K newest matches are certain. Best when the
            field follows time (e.g. created_at) or writes dominate
  eager     key = value, entry = the value's whole posting list (newest
            first), rewritten on every write of a record with that value: one
            read per lookup, the costliest writes (writers of one value wait
            for each other)
  lazy      every write appends a posting without reading; merges
            concatenate a value's fragments newest first. Lookups read the
            newest fragments first and stop at K: best for small K
  composite key = value + primary key (what btree stores); a recency query
            reads every match and sorts them: best without a limit on K

How an rtree, keyword or ngram index reconciles deleted and replaced records
(--reconcile):
  antimatter     an antimatter entry cancels the old one when they meet in a
                 merge (AMLSM); the default for rtree
  deleted-keys   the deleted primary keys go to a deleted-key B+-tree with a
                 bloom filter per component, checked by every search; the
                 default for keyword and ngram. Cannot be used with a leveled
                 merge policy
A btree index always uses antimatter.

Existing records are indexed by a bulk build; from then on every write
maintains the index in the same transaction as the record. A record missing an
indexed field (or holding null there) is not indexed. The merge policy
defaults to the dataset's; the forms are listed in `silt create-dataset --help`.

Examples:
  silt create-index tweets by_user --field user_id
  silt create-index events by_kind_ts --type btree --field kind --field ts --policy 'tiered(4)'
  silt create-index places loc --type rtree --field loc
  silt create-index places loc_dk --type rtree --field loc --reconcile deleted-keys
  silt create-index plants grid --type rtree --field pos --space 0,0,1000,1000
  silt create-index tweets words --type keyword --field text
  silt create-index tweets grams --type ngram --field text --gram 3
  silt create-index tweets by_user_emb --type embedded --field user_id
  silt create-index tweets by_time --type embedded --field created_at --bits-per-key 50
  silt create-index tweets by_user_lazy --type lazy --field user_id
  silt create-index tweets by_user_eager --type eager --field user_id
  silt create-index tweets by_user_comp --type composite --field user_id
  silt create-index events ts_zones --type brin --field ts";

const QUERY_HELP: &str = "\
One access path per query; the index's type says which flags apply:

  btree    --eq V...             records whose index fields equal the values
                                 (all fields, or a prefix of a composite index)
           --from V... --to V... a range, both ends inclusive, either may be
                                 omitted, and may give a prefix (--to 5 includes
                                 every (5, ...)); with none of --eq, --from
                                 and --to the whole index is read. Values are
                                 typed like `silt get` keys, then converted to
                                 the fields' declared types
  rtree    --bbox MINX,MINY,MAXX,MAXY
                                 geometries intersecting the box (edges
                                 included). MINX > MAXX means the box crosses
                                 the antimeridian: --bbox 170,-10,-170,10 covers
                                 longitudes 170..180 and -180..-170
           --intersects GEOMETRY geometries intersecting a WKT or GeoJSON
                                 geometry (also [x, y] or [minx, miny, maxx, maxy])
           --near LON,LAT --within-m METRES
                                 geometries within that great-circle distance
           --near LON,LAT --k K  the K nearest geometries, nearest first
           --join OTHER --join-field FIELD [--within-m METRES]
                                 spatial join: every record of dataset OTHER
                                 whose FIELD holds a geometry probes the index;
                                 each pair it finds is printed with the probe's
                                 primary key. With --within-m the probes must
                                 be points (others are skipped and counted)
  keyword  --text \"WORDS\" [--any] records containing all the words (any of
                                 them with --any); words are runs of letters
                                 and digits, case-insensitive
  ngram    --text \"TEXT\"         records whose text contains TEXT as a
                                 substring, case-insensitive
  brin     --eq V, or --from A and/or --to B
                                 records whose field equals V or lies in the
                                 range (both ends inclusive), reading only the
                                 blocks whose zone maps overlap
  embedded, eager, lazy, composite (and btree):
           --recent --eq V [--k K]
                                 the K most recent records whose field equals V,
                                 newest first (all of them without --k)
           --recent --from A --to B [--k K]
                                 the same for a range (both ends inclusive,
                                 either may be omitted). On embedded, eager and
                                 lazy indexes --recent may be left out
Coordinates are longitude, latitude in degrees (longitude first); distances
are great-circle metres.

Output, as JSON Lines on standard output:
  - by default each matching record is fetched from the primary index and the
    condition is checked again against it (the index may be behind or ahead
    of a write in flight); records come in primary key order (nearest first
    for --k, most recent first for --recent). Distance queries add
    \"_distance_m\" to each record;
  - with --index-only the index entries answer where they can decide alone
    (points and rectangles, btree and keyword entries), printed as
    {\"pk\": [primary key]} plus \"distance_m\" when known. A hit that had to
    be checked against its record (a polygon's bounding box, an n-gram
    candidate, a key a writer holds) also carries \"record\";
  - a join prints {\"probe\": <OTHER's primary key>, ...} followed by what the
    query would print for the hit (a record field named `probe` is replaced).
--limit N stops after N results (pairs for a join).

A summary goes to standard error: results, milliseconds, the access path
(validated through the primary, or index-only) and what the query touched:
index components (memory and disk, all partitions), R-tree leaf blocks read
from disk, candidate entries, records fetched from the primary index, and hits
answered from the index alone.

Examples:
  silt query tweets --index by_user --eq 42
  silt query tweets --index by_time --from 1700000000 --to 1700086400 --limit 100
  silt query events --index by_kind_ts --eq click --index-only
  silt query places --index loc --bbox -10,35,30,60
  silt query places --index loc --bbox 170,-20,-170,20
  silt query places --index loc --intersects 'POLYGON((2 48, 3 48, 3 49, 2 49, 2 48))'
  silt query places --index loc --intersects '{\"type\": \"Point\", \"coordinates\": [2.35, 48.86]}'
  silt query places --index loc --near 2.35,48.86 --within-m 1500
  silt query places --index loc --near 2.35,48.86 --k 5 --index-only
  silt query tweets --index words --text \"coffee morning\"
  silt query tweets --index words --text \"coffee tea\" --any --limit 10
  silt query tweets --index grams --text \"offe\"
  silt query places --index loc --join cities --join-field centre --within-m 5000
  silt query tweets --index by_user_lazy --recent --eq 42 --k 10
  silt query tweets --index by_time --recent --from 1420070400 --to 1420074000 --k 100
  silt query tweets --index by_user_comp --recent --eq 42";

const DROP_INDEX_HELP: &str = "\
Stops maintaining the index and deletes its files; the records are not
touched. Queries through the index fail afterwards. There is no undo: create
it again to rebuild it.

Example:
  silt drop-index tweets by_user";

const DELETE_HELP: &str = "\
Exits with 1 if there was no record with that key.

Examples:
  silt delete tweets 42
  silt delete events alice 1700000000";

const COMPACT_HELP: &str = "\
Flushes the dataset's in-memory components, waits for running merges, then
merges the disk components of every partition's primary index and of each
secondary index into one (one per level range under a leveled policy),
dropping deleted and overwritten versions. The counts shown cover all of them.

Example:
  silt compact tweets";

const STATS_HELP: &str = "\
For each dataset and index: disk components (count, per level, size), memory,
flushes, merges, bytes flushed and merged, user bytes written, write
amplification, gets and components probed per get (read amplification), bloom
filter negatives and false positives, scans; then block cache hits, misses and
hit ratio. Write counters (flushes, merges, bytes) are lifetime totals kept in each\nindex's MANIFEST; read counters (gets, scans, cache) count this process only.

Examples:
  silt stats
  silt stats tweets
  silt stats --json | jq '.datasets[0].indexes[0].components'";

const DROP_HELP: &str = "\
Removes the dataset from the catalog and deletes its files. There is no undo.

Example:
  silt drop-dataset tweets";

const DEMO_HELP: &str = "\
Generates a deterministic data set of geotagged tweet-like records (id,
user_id with a skewed distribution, created_at, text, a loc point clustered
around 20 cities), loads it with a progress bar, runs random point lookups and
range scans, bulk-builds an R-tree and a keyword index and queries them (the 5
tweets nearest to a point, the tweets with two words), deletes and upserts a
record, compacts, and prints timings and statistics.

Then it asks the same kind of questions through SQL in-process (a box, a
radius, kNN with ORDER BY ST_Distance ... LIMIT, a text search, a spatial join
with a small `landmarks` table it creates, an aggregate), printing each
statement, the access path EXPLAIN shows, its answer and its times, and checks
every answer against the native API's; then it starts `silt serve` on free
loopback ports, sends one query through the PostgreSQL wire protocol, checks
it, and stops the server. It ends with the lines to type next (silt serve,
psql, Python). A differing answer fails the demo (exit code 1), so it doubles
as a smoke test.

The directory (--dir; --db is not used) is wiped first: it must be absent,
empty, or a Silt database that no other process holds.

Examples:
  silt demo
  silt demo --records 1000000 --dir /tmp/silt-demo --policy 'tiered(4)'";

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a dataset: its primary key, declared field types and storage options.
    #[command(after_help = CREATE_HELP)]
    CreateDataset {
        /// Dataset name (letters, digits, `_` and `-`).
        name: String,
        /// Primary key field(s), comma-separated for a composite key.
        #[arg(
            long,
            value_name = "FIELD[,FIELD...]",
            value_delimiter = ',',
            required = true
        )]
        key: Vec<String>,
        /// Declare a field's type; repeat for each field (or separate with
        /// commas): int, double, string, bool, binary, date, timestamp,
        /// timestamptz, decimal(P,S), json, point, rectangle, polygon,
        /// geometry, any.
        #[arg(long = "field", value_name = "NAME:TYPE")]
        fields: Vec<String>,
        /// Number of hash partitions of the primary key (1-1024) [default: 1].
        #[arg(long, value_name = "N")]
        partitions: Option<u32>,
        /// Memory budget of the dataset's in-memory components, in MiB [default: 64].
        #[arg(long, value_name = "N")]
        memory_mb: Option<u64>,
        /// Merge policy, e.g. `prefix(1GB,5)`, `tiered(4)`, `leveled` (forms below) [default: prefix(1GB,5)].
        #[arg(long, value_name = "SPEC")]
        policy: Option<String>,
        /// Block compression: lz4, zstd or none [default: lz4]. `none` makes random
        /// record reads ~2.5x cheaper (blocks are read in place from the page cache)
        /// at 20-50% more disk; lz4 and zstd go through the block cache.
        #[arg(long, value_name = "CODEC")]
        compression: Option<String>,
        /// Keep the dataset's component files in object storage:
        /// s3://bucket/prefix (Amazon S3 or an S3-compatible server; the
        /// credentials and endpoint come from AWS_ACCESS_KEY_ID,
        /// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL). The log and
        /// the catalog stay in the database directory.
        #[arg(long, value_name = "URL")]
        remote: Option<String>,
        /// With --remote: the first level kept in the bucket; levels above
        /// it stay on the local disk (a leveled policy's hot levels) [default: 0, all].
        #[arg(long, value_name = "N", requires = "remote")]
        remote_level: Option<u32>,
        /// Also create a btree secondary index on FIELD (a composite one on FIELD,FIELD2...), or NAME:TYPE:FIELD of another type; repeatable.
        #[arg(long = "index", value_name = "NAME:[TYPE:]FIELD[,FIELD...]")]
        indexes: Vec<String>,
        /// Records expire at the value of this int or timestamp field (see
        /// "Records that expire" below).
        #[arg(long, value_name = "FIELD")]
        ttl_expiry: Option<String>,
        /// The field holding each record's time: --ttl-after counts from it,
        /// and the written clock follows it.
        #[arg(long, value_name = "FIELD")]
        ttl_time: Option<String>,
        /// Records expire this long past their --ttl-time (in the clock's unit).
        #[arg(long, value_name = "N")]
        ttl_after: Option<i64>,
        /// The clock records expire by: written (the largest time written),
        /// unix_s, unix_ms or unix_us [default: unix_us on a timestamp, else written].
        #[arg(long, value_name = "CLOCK")]
        ttl_clock: Option<String>,
        /// How long past its expiry a record is kept (unseen) before the sweep deletes it.
        #[arg(long, value_name = "N")]
        ttl_grace: Option<i64>,
    },

    /// Create a secondary index on a dataset and build it over the existing records.
    #[command(after_help = CREATE_INDEX_HELP)]
    CreateIndex {
        /// Dataset name.
        dataset: String,
        /// Index name (letters, digits, `_` and `-`).
        name: String,
        /// Index type: btree, rtree, dhvb, dhb, shb, sif, keyword or ngram (see below).
        #[arg(long = "type", value_name = "TYPE", default_value = "btree")]
        kind: String,
        /// Indexed field; for a composite btree index repeat it (or separate with commas), in key order.
        #[arg(
            long = "field",
            value_name = "FIELD",
            value_delimiter = ',',
            required = true
        )]
        fields: Vec<String>,
        /// How deletes are reconciled (rtree, keyword, ngram): antimatter or deleted-keys [default: antimatter for rtree, deleted-keys otherwise].
        #[arg(long, value_name = "MODE")]
        reconcile: Option<String>,
        /// N-gram length of an ngram index (1-32) [default: 3].
        #[arg(long, value_name = "N")]
        gram: Option<usize>,
        /// Coordinate space of an rtree index, mapped onto its Hilbert curve [default: -180,-90,180,90].
        #[arg(long, value_name = "MINX,MINY,MAXX,MAXY", allow_hyphen_values = true)]
        space: Option<String>,
        /// Merge policy of the index, e.g. `tiered(4)` [default: the dataset's policy].
        #[arg(long, value_name = "SPEC")]
        policy: Option<String>,
        /// Bloom filter bits per value and block of an embedded index (1-1000) [default: 100].
        #[arg(long, value_name = "BITS")]
        bits_per_key: Option<f64>,
        /// Order of an rtree index's disk components: hilbert, simple (x, then y) or zorder (Z-value; with a leveled policy, queries skip components by Z range) [default: hilbert].
        #[arg(long, value_name = "ORDER")]
        order: Option<String>,
        /// Grid levels of an shb or sif index, top first: l (4x4), m (8x8), h (16x16) or n of 2^n x 2^n, e.g. l,l,l,l,h,m [default: h,h,h,h,h,h].
        #[arg(long, value_name = "LEVELS")]
        levels: Option<String>,
        /// The integer time field of a valuelist index (its items are ordered and read by it).
        #[arg(long, value_name = "FIELD")]
        time: Option<String>,
        /// The integer expiry field of a valuelist index (merges drop expired items) [default: none, items never expire].
        #[arg(long, value_name = "FIELD")]
        expiry: Option<String>,
        /// A brin index over chunks of this many bytes (e.g. 4M or 16M) instead of a zone map per block.
        #[arg(long, value_name = "SIZE")]
        chunk_size: Option<String>,
        /// A chunked brin index's form: interval-tree or key-value [default: interval-tree].
        #[arg(long, value_name = "FORM")]
        form: Option<String>,
    },

    /// Load records from a JSON Lines or CSV file (or standard input) into a dataset.
    #[command(after_help = LOAD_HELP)]
    Load {
        /// Dataset name.
        name: String,
        /// Input file; `-` reads standard input.
        file: String,
        /// Input format [default: from the file extension, else jsonl].
        #[arg(long, value_enum)]
        format: Option<load::Format>,
        /// What to do with a record whose primary key already exists.
        #[arg(long, value_enum, default_value_t = load::Mode::Insert)]
        mode: load::Mode,
        /// Print a progress line on standard error every N records (useful in logs).
        #[arg(long, value_name = "N")]
        batch_report: Option<u64>,
    },

    /// Look up one record by primary key and print it as JSON.
    #[command(after_help = GET_HELP)]
    Get {
        /// Dataset name.
        name: String,
        /// Primary key value(s), one per key field.
        #[arg(required = true, allow_negative_numbers = true, value_name = "KEY")]
        key: Vec<String>,
        /// Pretty-print the JSON.
        #[arg(long)]
        pretty: bool,
    },

    /// Print the records of a primary key range as JSON Lines.
    #[command(after_help = SCAN_HELP)]
    Scan {
        /// Dataset name.
        name: String,
        /// Lowest key (inclusive), one value per key field or a prefix.
        #[arg(long, num_args = 1.., allow_negative_numbers = true, value_name = "KEY")]
        from: Vec<String>,
        /// Highest key (inclusive), one value per key field or a prefix.
        #[arg(long, num_args = 1.., allow_negative_numbers = true, value_name = "KEY")]
        to: Vec<String>,
        /// Print at most N records.
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
    },

    /// Find records through a secondary index: key ranges, geometries, distances, nearest neighbours, words, substrings, spatial joins.
    #[command(after_help = QUERY_HELP)]
    Query {
        /// Dataset name.
        dataset: String,
        /// Secondary index to use.
        #[arg(long, value_name = "NAME", required = true)]
        index: String,
        /// Equal to these values, one per index field or a prefix.
        #[arg(
            long,
            num_args = 1..,
            allow_negative_numbers = true,
            value_name = "V",
            conflicts_with_all = ["from", "to"],
            help_heading = "btree"
        )]
        eq: Vec<String>,
        /// Lowest value(s) (inclusive), one per index field or a prefix.
        #[arg(
            long,
            num_args = 1..,
            allow_negative_numbers = true,
            value_name = "V",
            help_heading = "btree"
        )]
        from: Vec<String>,
        /// Highest value(s) (inclusive), one per index field or a prefix.
        #[arg(
            long,
            num_args = 1..,
            allow_negative_numbers = true,
            value_name = "V",
            help_heading = "btree"
        )]
        to: Vec<String>,
        /// Geometries intersecting this box; MINX > MAXX crosses the antimeridian.
        #[arg(
            long,
            value_name = "MINX,MINY,MAXX,MAXY",
            allow_hyphen_values = true,
            help_heading = "rtree"
        )]
        bbox: Option<String>,
        /// Geometries intersecting this WKT or GeoJSON geometry.
        #[arg(
            long,
            value_name = "GEOMETRY",
            allow_hyphen_values = true,
            help_heading = "rtree"
        )]
        intersects: Option<String>,
        /// The point of a distance (--within-m) or nearest-neighbour (--k) query.
        #[arg(
            long,
            value_name = "LON,LAT",
            allow_hyphen_values = true,
            help_heading = "rtree"
        )]
        near: Option<String>,
        /// Within this great-circle distance of --near (or of each --join probe).
        #[arg(
            long,
            value_name = "METRES",
            allow_negative_numbers = true,
            help_heading = "rtree"
        )]
        within_m: Option<f64>,
        /// The K geometries nearest to --near, nearest first; with --recent, the K most recent matches.
        #[arg(long, value_name = "K", help_heading = "rtree")]
        k: Option<u64>,
        /// The most recent matches of --eq or --from/--to first (with --k: only K of them).
        #[arg(
            long,
            help_heading = "recency (embedded, eager, lazy, composite, btree)"
        )]
        recent: bool,
        /// Spatial join with the records of this dataset (needs --join-field).
        #[arg(long, value_name = "OTHER_DATASET", help_heading = "rtree")]
        join: Option<String>,
        /// The geometry field of the --join dataset whose values probe the index.
        #[arg(long, value_name = "FIELD", help_heading = "rtree")]
        join_field: Option<String>,
        /// keyword: records with all these words; ngram: records containing this text.
        #[arg(
            long,
            value_name = "TEXT",
            allow_hyphen_values = true,
            help_heading = "keyword and ngram"
        )]
        text: Option<String>,
        /// keyword: records with any of the --text words instead of all of them.
        #[arg(long, help_heading = "keyword and ngram")]
        any: bool,
        /// Print at most N results.
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
        /// Answer from the index entries where they decide alone: print {"pk": [...]} lines.
        #[arg(long)]
        index_only: bool,
    },

    /// Delete one record by primary key and say whether it existed.
    #[command(after_help = DELETE_HELP)]
    Delete {
        /// Dataset name.
        name: String,
        /// Primary key value(s), one per key field.
        #[arg(required = true, allow_negative_numbers = true, value_name = "KEY")]
        key: Vec<String>,
    },

    /// Merge all of a dataset's disk components, showing the components before and after.
    #[command(after_help = COMPACT_HELP)]
    Compact {
        /// Dataset name.
        name: String,
    },

    /// Show storage statistics of every dataset (or one), as a table or as JSON.
    #[command(after_help = STATS_HELP)]
    Stats {
        /// Only this dataset.
        name: Option<String>,
        /// Print the raw statistics as JSON.
        #[arg(long)]
        json: bool,
    },

    /// Delete a secondary index and its files (the records stay).
    #[command(after_help = DROP_INDEX_HELP)]
    DropIndex {
        /// Dataset name.
        dataset: String,
        /// Index name.
        name: String,
    },

    /// Delete a dataset and all its files.
    #[command(after_help = DROP_HELP)]
    DropDataset {
        /// Dataset name.
        name: String,
    },

    /// Run a guided tour on a generated data set: load, lookups, scans, spatial and keyword indexes, delete, upsert, compact, stats, then SQL and the server.
    #[command(after_help = DEMO_HELP)]
    Demo {
        /// Number of records to generate.
        #[arg(long, value_name = "N", default_value_t = 200_000)]
        records: u64,
        /// Directory of the demo database (wiped first).
        #[arg(long, value_name = "PATH", default_value = "./silt-demo")]
        dir: PathBuf,
        /// Hash partitions of the demo dataset.
        #[arg(long, value_name = "N", default_value_t = 2)]
        partitions: u32,
        /// Memory budget of the demo dataset in MiB (small, so that the load flushes and merges).
        #[arg(long, value_name = "N", default_value_t = 4)]
        memory_mb: u64,
        /// Merge policy of the demo dataset [default: prefix(1GB,5)].
        #[arg(long, value_name = "SPEC")]
        policy: Option<String>,
    },

    /// Serve SQL over the PostgreSQL wire protocol and HTTP until Ctrl-C.
    #[command(after_help = SERVE_HELP)]
    Serve {
        /// PostgreSQL wire protocol address (HOST:PORT, or `off`).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:5433")]
        pg: String,
        /// HTTP address (HOST:PORT, or `off`).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
        http: String,
        /// Statements executing at once.
        #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
        max_concurrent: u64,
        /// Statements that may wait for a free slot before "server busy".
        #[arg(long, value_name = "N", default_value_t = 64)]
        queue: u64,
        /// Cancel a statement after this long (e.g. 500ms, 30s, 2m; 0: never).
        /// It is each session's default statement_timeout, and the most a
        /// session may set.
        #[arg(long, value_name = "DURATION", default_value = "30s")]
        timeout: String,
        /// TLS certificate chain (PEM) for both listeners; needs --tls-key.
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// Private key (PEM) of --tls-cert.
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Refuse PostgreSQL connections without TLS.
        #[arg(long, requires = "tls_cert")]
        tls_required: bool,
        /// Let admins read and write files below DIR (CREATE EXTERNAL TABLE, COPY ... TO); off by default.
        #[arg(long, value_name = "DIR")]
        server_files: Option<PathBuf>,
        #[command(flatten)]
        bounds: ServeBounds,
    },

    /// Add, change, drop and list the users who may log in to `silt serve`.
    #[command(after_help = user::USER_HELP)]
    User {
        #[command(subcommand)]
        cmd: user::UserCommand,
    },

    /// Choose Synergy's hierarchies, materialized views and view indexes
    /// from roots and the workload's queries (made with --install).
    Design(design::DesignArgs),

    /// Hydra: a block volume replicated across processes, served over NBD
    /// (--db is not used).
    #[command(after_help = volume::VOLUME_HELP)]
    Volume {
        #[command(subcommand)]
        cmd: volume::VolumeCommand,
    },
}

/// The resource bounds of `silt serve` (sizes: 512MiB, 1GiB, 64KiB, 100MB,
/// bytes; 0 or off: no limit).
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Resource bounds (0 or off: no limit)")]
struct ServeBounds {
    /// Memory one statement's sorts, joins and aggregates may hold; sorts
    /// and aggregates spill to disk beyond it, the rest fail (SQLSTATE
    /// 53200, "query needs more than ...").
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    max_query_memory: String,
    /// The same for all statements together (53200 beyond: retry later).
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    max_server_memory: String,
    /// The largest value a function may build: repeat('x', 2000000000),
    /// lpad, concat... are refused before building it (54000).
    #[arg(long, value_name = "SIZE", default_value = "64MiB")]
    max_value_bytes: String,
    /// The most bytes one statement's result may have (54000; over HTTP the
    /// collected JSON counts).
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    max_result_bytes: String,
    /// The most rows one statement's result may have (54000).
    #[arg(long, value_name = "N", default_value_t = 0)]
    max_result_rows: u64,
    /// Open connections per front end; more get "too many connections"
    /// (PostgreSQL 53300, HTTP 503).
    #[arg(long, value_name = "N", default_value_t = 100)]
    max_connections: u64,
    /// Close a connection idle this long outside a transaction block
    /// (PostgreSQL 57P05).
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    idle_timeout: String,
    /// Close a PostgreSQL session idle this long inside a transaction
    /// block; the block rolls back (25P03).
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    idle_in_transaction_timeout: String,
    /// The longest PostgreSQL message and HTTP request body (HTTP 413).
    #[arg(long, value_name = "SIZE", default_value = "16MiB")]
    max_request_bytes: String,
    /// Column images kept for full scans (aggregates, joins, filters on
    /// columns without an index): a dataset's components decoded once into
    /// columns and read again without decoding records. Counted apart
    /// from the query memory limits.
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    column_cache: String,
}

fn run(cli: Cli) -> CliResult<()> {
    let open = |create: bool| util::open_db(&cli.db, cli.cache_mb, cli.durability, create);
    match &cli.command {
        Command::CreateDataset {
            name,
            key,
            fields,
            partitions,
            memory_mb,
            policy,
            compression,
            remote,
            remote_level,
            indexes,
            ttl_expiry,
            ttl_time,
            ttl_after,
            ttl_clock,
            ttl_grace,
        } => {
            let any_ttl = ttl_expiry.is_some()
                || ttl_time.is_some()
                || ttl_after.is_some()
                || ttl_clock.is_some()
                || ttl_grace.is_some();
            let opts = commands::CreateOptions {
                name,
                key,
                fields,
                partitions: *partitions,
                memory_mb: *memory_mb,
                policy: policy.as_deref(),
                compression: compression.as_deref(),
                remote: remote.as_deref().map(|u| (u, remote_level.unwrap_or(0))),
                indexes,
                ttl: any_ttl.then(|| silt::TtlDef {
                    time: ttl_time.clone(),
                    expiry: ttl_expiry.clone(),
                    after: *ttl_after,
                    clock: ttl_clock.clone(),
                    grace: ttl_grace.unwrap_or(0),
                }),
            };
            // Check the definition before creating a database directory for it.
            commands::dataset_def(&opts)?;
            let db = open(true)?;
            commands::create_dataset(&db, &opts)?;
            Ok(db.close()?)
        }
        Command::Load {
            name,
            file,
            format,
            mode,
            batch_report,
        } => {
            let db = open(false)?;
            load::run(
                &db,
                &load::LoadOptions {
                    dataset: name,
                    file,
                    format: *format,
                    mode: *mode,
                    batch_report: *batch_report,
                },
            )
        }
        Command::Get { name, key, pretty } => {
            let db = open(false)?;
            commands::get(&db, name, key, *pretty)?;
            Ok(db.close()?)
        }
        Command::Scan {
            name,
            from,
            to,
            limit,
        } => {
            let db = open(false)?;
            commands::scan(&db, name, from, to, *limit)?;
            Ok(db.close()?)
        }
        Command::CreateIndex {
            dataset,
            name,
            kind,
            fields,
            reconcile,
            gram,
            space,
            policy,
            bits_per_key,
            order,
            levels,
            time,
            expiry,
            chunk_size,
            form,
        } => {
            let params = index::IndexParams {
                reconcile: reconcile.as_deref(),
                gram: *gram,
                space: space.as_deref(),
                policy: policy.as_deref(),
                bits_per_key: *bits_per_key,
                order: order.as_deref(),
                levels: levels.as_deref(),
                time: time.as_deref(),
                expiry: expiry.as_deref(),
                chunk_size: chunk_size.as_deref(),
                form: form.as_deref(),
            };
            // Check the flags before opening the database (the field types
            // and the dataset's merge policy are checked once it is open).
            let k = index::parse_kind(kind)?;
            index::index_def(name, k, fields, &params, &MergePolicy::default())?;
            let db = open(false)?;
            index::create_index(
                &db,
                &index::CreateIndexOptions {
                    dataset,
                    name,
                    kind,
                    fields,
                    params,
                },
            )?;
            Ok(db.close()?)
        }
        Command::Query {
            dataset,
            index,
            eq,
            from,
            to,
            bbox,
            intersects,
            near,
            within_m,
            k,
            join,
            join_field,
            text,
            any,
            limit,
            index_only,
            recent,
        } => {
            let db = open(false)?;
            query::query(
                &db,
                &query::QueryArgs {
                    dataset,
                    index,
                    eq,
                    from,
                    to,
                    bbox: bbox.as_deref(),
                    intersects: intersects.as_deref(),
                    near: near.as_deref(),
                    within_m: *within_m,
                    k: *k,
                    text: text.as_deref(),
                    any: *any,
                    join: join.as_deref(),
                    join_field: join_field.as_deref(),
                    limit: *limit,
                    index_only: *index_only,
                    recent: *recent,
                },
            )?;
            Ok(db.close()?)
        }
        Command::DropIndex { dataset, name } => {
            let db = open(false)?;
            index::drop_index(&db, dataset, name)?;
            Ok(db.close()?)
        }
        Command::Delete { name, key } => {
            let db = open(false)?;
            commands::delete(&db, name, key)?;
            Ok(db.close()?)
        }
        Command::Compact { name } => {
            let db = open(false)?;
            commands::compact(&db, name)?;
            Ok(db.close()?)
        }
        Command::Stats { name, json } => {
            let db = open(false)?;
            commands::stats(&db, name.as_deref(), *json)?;
            Ok(db.close()?)
        }
        Command::DropDataset { name } => {
            let db = open(false)?;
            commands::drop_dataset(&db, name)?;
            Ok(db.close()?)
        }
        Command::Demo {
            records,
            dir,
            partitions,
            memory_mb,
            policy,
        } => demo::run(&demo::DemoOptions {
            records: *records,
            dir,
            cache_mb: cli.cache_mb,
            partitions: *partitions,
            memory_mb: *memory_mb,
            policy: policy.as_deref(),
        }),
        Command::Serve {
            pg,
            http,
            max_concurrent,
            queue,
            timeout,
            tls_cert,
            tls_key,
            tls_required,
            server_files,
            bounds,
        } => {
            let as_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
            let mut cfg = silt_server::cli::config(
                pg,
                http,
                as_usize(*max_concurrent),
                as_usize(*queue),
                timeout,
            )
            .map_err(|e| CliError::Usage(e.to_string()))?;
            cfg.tls = match (tls_cert, tls_key) {
                (Some(cert), Some(key)) => Some(silt_server::tls::TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                }),
                _ => None,
            };
            cfg.tls_required = *tls_required;
            cfg.server_files = server_files.clone();
            let flags = silt_server::cli::BoundFlags {
                max_query_memory: bounds.max_query_memory.clone(),
                max_server_memory: bounds.max_server_memory.clone(),
                max_value_bytes: bounds.max_value_bytes.clone(),
                max_result_bytes: bounds.max_result_bytes.clone(),
                max_result_rows: bounds.max_result_rows,
                max_connections: as_usize(bounds.max_connections),
                idle_timeout: bounds.idle_timeout.clone(),
                idle_in_transaction_timeout: bounds.idle_in_transaction_timeout.clone(),
                max_request_bytes: bounds.max_request_bytes.clone(),
                column_cache: bounds.column_cache.clone(),
            };
            silt_server::cli::apply_bounds(&mut cfg, &flags)
                .map_err(|e| CliError::Usage(e.to_string()))?;
            let db = open(true)?;
            silt_server::cli::serve_until_signal(db, cfg).map_err(|e| match e {
                silt_server::ServerError::Bind { .. } | silt_server::ServerError::Config(_) => {
                    CliError::Usage(e.to_string())
                }
                other => CliError::Failed(other.to_string()),
            })
        }
        Command::User { cmd } => {
            let db = open(true)?;
            user::run(&db, cmd)?;
            Ok(db.close()?)
        }
        Command::Design(args) => {
            let db = std::sync::Arc::new(open(false)?);
            design::run(db.clone(), args)?;
            Ok(db.close()?)
        }
        Command::Volume { cmd } => volume::run(cmd),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Datasets may keep levels in object storage (s3://, memory://).
    silt_objstore::install();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::BrokenPipe) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }
}
