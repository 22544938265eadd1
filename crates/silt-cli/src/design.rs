//! `silt design`: Synergy's design of a database (seed 004 §4.3-4.5) from
//! the designer's roots and a file of the workload's queries: the rooted
//! trees of the schema graph (its foreign keys), the materialized views
//! the queries' joins select and the view indexes their filters ask for.
//! Printed; with `--install`, made: each tree member put in its hierarchy
//! (a write locks the root's key), each view created (kept by every
//! commit of its tables) with its indexes. Queries whose joins a view
//! holds then read it (`silt serve`, `EXPLAIN` shows `MaterializedViews`).

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use silt::Database;
use silt::synergy::design;
use silt_sql::SqlEngine;

use crate::error::{CliError, CliResult};

pub const DESIGN_HELP: &str = "\
Examples:
  silt design --roots customer --workload queries.sql
  silt design --roots author,customer,country --workload tpcw.sql --install

The workload file holds the queries (SELECT ...; separated by semicolons;
$1, $2 parameters allowed). Each is planned as it would run: a join in
WHERE counts as one in ON. Roots are tables with no foreign key into the
tree; every other table joins the tree of the root it reaches by the
heaviest foreign keys (the number of workload joins on them). Run it on a
stopped database (the server holds it open).";

#[derive(clap::Args, Debug)]
#[command(after_help = DESIGN_HELP)]
pub struct DesignArgs {
    /// The roots of the hierarchies, comma-separated: a write under a root
    /// locks that root's row, and views are paths down from the roots.
    #[arg(
        long,
        value_name = "TABLE[,TABLE...]",
        value_delimiter = ',',
        required = true
    )]
    roots: Vec<String>,
    /// The file of the workload's queries (`-`: standard input).
    #[arg(long, value_name = "FILE")]
    workload: PathBuf,
    /// Make what the design chose (hierarchies, views, view indexes);
    /// without it the design is only printed.
    #[arg(long)]
    install: bool,
}

fn failed(e: impl std::fmt::Display) -> CliError {
    CliError::Failed(e.to_string())
}

pub fn run(db: Arc<Database>, args: &DesignArgs) -> CliResult<()> {
    let text = if args.workload.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| {
            CliError::Usage(format!("cannot read the workload from standard input: {e}"))
        })?;
        s
    } else {
        std::fs::read_to_string(&args.workload).map_err(|e| {
            CliError::Usage(format!(
                "cannot read the workload file {}: {e}",
                args.workload.display()
            ))
        })?
    };
    let engine = SqlEngine::new(db.clone()).map_err(failed)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    let queries = rt
        .block_on(engine.workload(&text))
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let joining = queries.iter().filter(|q| !q.joins.is_empty()).count();
    println!("{} queries, {joining} with joins", queries.len());
    let roots: Vec<&str> = args.roots.iter().map(String::as_str).collect();
    let d = design::design(&db, &roots, &queries)?;
    for tree in d.forest.trees() {
        println!("tree {}:", tree.root());
        for m in tree.members() {
            if let Some(e) = tree.parent_edge(m) {
                println!("  {m} -> {} ({})", e.parent, e.columns.join(", "));
            }
        }
    }
    println!("views:");
    for v in &d.selection.views {
        println!("  {}: {}", v.name(), v.relations().join(" -> "));
    }
    if d.selection.views.is_empty() {
        println!("  (none: no query joins along a tree)");
    }
    println!("view indexes:");
    for ix in &d.selection.indexes {
        println!(
            "  {} ({}.{})",
            ix.view, ix.attribute.relation, ix.attribute.column
        );
    }
    if args.install {
        let made = design::install(&db, &d)?;
        println!(
            "installed: hierarchies set, {} view(s) made{}",
            made.len(),
            if made.is_empty() {
                String::new()
            } else {
                format!(" ({})", made.join(", "))
            }
        );
    } else {
        println!("(nothing changed; --install makes it)");
    }
    drop(engine);
    Ok(())
}
