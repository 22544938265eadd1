//! Criterion benchmarks of one small query's stages (issue #31 item 1):
//! the native API, DataFusion's own stages on the engine's session
//! (parse, logical plan, optimize, physical plan, execute), the engine's
//! cached path in-process, and a round trip through `silt serve`'s
//! PostgreSQL protocol on loopback (simple and extended protocol).
//!
//! `cargo bench --bench sql_stages` from `bench/` (set `CARGO_TARGET_DIR`
//! to keep its build beside the harness's). 20,000 points in a 10x10
//! degree square, an R-tree on them; a box of ~10 hits; kNN 10.

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};

const N: usize = 20_000;
/// A box of side 2h in a 10x10 degree square of N points holds ~N*4h²/100
/// of them: h = 0.11 gives ~10.
const HALF: f64 = 0.11;

struct Fixture {
    _dir: TempDir,
    db: Arc<silt::Database>,
    sql: silt_sql::SqlEngine,
    rt: tokio::runtime::Runtime,
    centres: Vec<(f64, f64)>,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fixture() -> Fixture {
    let dir = std::env::temp_dir().join(format!("silt-sql-stages-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let db = Arc::new(silt::Database::open(&dir, silt::DbOptions::default()).expect("open"));
    let sql = silt_sql::SqlEngine::new(db.clone()).expect("engine");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let run = |s: &str| {
        rt.block_on(sql.execute(s)).expect(s);
    };
    run("CREATE TABLE pts (id BIGINT PRIMARY KEY, name VARCHAR, loc GEOMETRY)");
    run("CREATE INDEX pts_loc ON pts USING rtree (loc)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(31);
    let pts: Vec<(f64, f64)> = (0..N)
        .map(|_| (rng.random_range(0.0..10.0), rng.random_range(40.0..50.0)))
        .collect();
    for chunk in (0..N).collect::<Vec<_>>().chunks(1000) {
        let values: Vec<String> = chunk
            .iter()
            .map(|&k| format!("({k}, 'p{k}', ST_Point({}, {}))", pts[k].0, pts[k].1))
            .collect();
        run(&format!("INSERT INTO pts VALUES {}", values.join(",")));
    }
    let centres = (0..1024).map(|i| pts[(i * 7919) % N]).collect();
    Fixture {
        _dir: TempDir(dir),
        db,
        sql,
        rt,
        centres,
    }
}

fn lookup_text(i: usize) -> String {
    format!("SELECT id, name FROM pts WHERE id = {}", (i * 104_729) % N)
}

fn box_text(c: (f64, f64)) -> String {
    format!(
        "SELECT id, name FROM pts WHERE ST_Intersects(loc, ST_MakeEnvelope({}, {}, {}, {}))",
        c.0 - HALF,
        c.1 - HALF,
        c.0 + HALF,
        c.1 + HALF
    )
}

fn knn_text(c: (f64, f64)) -> String {
    format!(
        "SELECT id, name FROM pts ORDER BY ST_Distance(loc, ST_Point({}, {})) LIMIT 10",
        c.0, c.1
    )
}

fn stages(c: &mut Criterion) {
    use silt::{Geometry, Query, QueryOptions, Value};
    let f = fixture();
    let ds = f.db.dataset("pts").expect("dataset");
    let mut i = 0usize;
    let mut next = || {
        i = i.wrapping_add(1);
        i
    };

    let mut g = c.benchmark_group("native");
    g.bench_function("lookup", |b| {
        b.iter(|| {
            let k = ((next() * 104_729) % N) as i64;
            ds.get(&[Value::Int(k)]).expect("get")
        })
    });
    g.bench_function("box", |b| {
        b.iter(|| {
            let (x, y) = f.centres[next() % 1024];
            let q = Query::Intersects(Geometry::Rect {
                min_x: x - HALF,
                min_y: y - HALF,
                max_x: x + HALF,
                max_y: y + HALF,
            });
            ds.query("pts_loc", &q, QueryOptions::default())
                .expect("query")
                .count()
        })
    });
    g.bench_function("knn", |b| {
        b.iter(|| {
            let (lon, lat) = f.centres[next() % 1024];
            let q = Query::Nearest { lon, lat, k: 10 };
            ds.query("pts_loc", &q, QueryOptions::default())
                .expect("query")
                .count()
        })
    });
    g.finish();

    // The engine's own path: the plan cache and kept physical plans.
    let mut g = c.benchmark_group("sql_cached");
    let texts: [(&str, Box<dyn Fn(usize) -> String>); 3] = [
        ("lookup", Box::new(lookup_text)),
        ("box", Box::new(|i| box_text(f.centres[i % 1024]))),
        ("knn", Box::new(|i| knn_text(f.centres[i % 1024]))),
    ];
    for (name, text) in &texts {
        g.bench_function(*name, |b| {
            b.iter(|| {
                let s = text(next());
                f.rt.block_on(f.sql.execute(&s)).expect("query")
            })
        });
    }
    g.finish();

    // DataFusion's stages on the engine's session, uncached (what every
    // statement cost before the plan cache; the shape of a box query).
    let mut g = c.benchmark_group("datafusion_box");
    let ctx = f.sql.session();
    let dialect = datafusion::common::config::Dialect::PostgreSQL;
    let text = box_text(f.centres[0]);
    let state = ctx.state();
    let stmt = state.sql_to_statement(&text, &dialect).expect("parse");
    let logical =
        f.rt.block_on(state.statement_to_plan(stmt.clone()))
            .expect("plan");
    let optimized = state.optimize(&logical).expect("optimize");
    let physical =
        f.rt.block_on(
            state
                .query_planner()
                .create_physical_plan(&optimized, &state),
        )
        .expect("physical");
    g.bench_function("parse", |b| {
        b.iter(|| state.sql_to_statement(&text, &dialect).expect("parse"))
    });
    g.bench_function("logical_plan", |b| {
        b.iter(|| {
            f.rt.block_on(state.statement_to_plan(stmt.clone()))
                .expect("plan")
        })
    });
    g.bench_function("optimize", |b| {
        b.iter(|| state.optimize(&logical).expect("optimize"))
    });
    g.bench_function("physical_plan", |b| {
        b.iter(|| {
            f.rt.block_on(
                state
                    .query_planner()
                    .create_physical_plan(&optimized, &state),
            )
            .expect("physical")
        })
    });
    g.bench_function("execute", |b| {
        b.iter(|| {
            f.rt.block_on(datafusion::physical_plan::collect(
                physical.clone(),
                state.task_ctx(),
            ))
            .expect("execute")
        })
    });
    g.finish();

    // Through `silt serve`'s PostgreSQL protocol on loopback.
    let cfg = silt_server::cli::config("127.0.0.1:0", "off", 4, 256, "30s").expect("config");
    let server =
        f.rt.block_on(silt_server::Server::start(f.db.clone(), cfg))
            .expect("server");
    let port = server.pg_addr().expect("pg address").port();
    let mut client = postgres::Client::connect(
        &format!("host=127.0.0.1 port={port} user=bench dbname=silt"),
        postgres::NoTls,
    )
    .expect("connect");
    let mut g = c.benchmark_group("pgwire");
    for (name, text) in &texts {
        g.bench_function(format!("{name}_simple"), |b| {
            b.iter(|| client.simple_query(&text(next())).expect("query"))
        });
    }
    let lookup = client
        .prepare("SELECT id, name FROM pts WHERE id = $1")
        .expect("prepare");
    g.bench_function("lookup_prepared", |b| {
        b.iter(|| {
            let k = ((next() * 104_729) % N) as i64;
            client.query(&lookup, &[&k]).expect("query")
        })
    });
    g.finish();
    drop(client);
    f.rt.block_on(server.shutdown()).expect("shutdown");
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = stages
}
criterion_main!(benches);
