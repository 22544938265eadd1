//! How an index definition reads to a person: `btree on age, name`,
//! `rtree on loc (reconcile antimatter)`. Used by `create-index`, `query`,
//! `stats` and the demo.

use silt::{IndexDef, IndexKind, ReconcileOption};

/// The command-line name of a reconciliation mode.
pub fn reconcile_name(r: ReconcileOption) -> &'static str {
    match r {
        ReconcileOption::Antimatter => "antimatter",
        ReconcileOption::DeletedKeys => "deleted-keys",
    }
}

/// The kind-specific options of an index, each as `NAME<sep>VALUE`:
/// `gram 3`, `reconcile antimatter`, `space 0,0,100,100`.
pub fn option_parts(def: &IndexDef, sep: &str) -> Vec<String> {
    let mut out = Vec::new();
    if def.kind == IndexKind::Ngram {
        out.push(format!("gram{sep}{}", def.gram()));
    }
    if !(def.kind.is_btree() || def.kind.is_recency()) {
        out.push(format!(
            "reconcile{sep}{}",
            reconcile_name(def.reconcile_mode())
        ));
    }
    if def.kind == IndexKind::Embedded {
        out.push(format!("bits per key{sep}{}", def.bits_per_key()));
    }
    if let Some((b, form)) = def.chunks() {
        out.push(format!("chunk size{sep}{}", crate::util::bytes(b)));
        out.push(format!("form{sep}{}", form.name().replace('_', "-")));
    }
    if let Some(o) = def.options.order {
        out.push(format!(
            "order{sep}{}",
            match o {
                silt::index::RtreeOrder::Hilbert => "hilbert",
                silt::index::RtreeOrder::Simple => "simple",
                silt::index::RtreeOrder::Zorder => "zorder",
            }
        ));
    }
    if let Some(l) = &def.options.levels {
        let l: Vec<String> = l.iter().map(u8::to_string).collect();
        out.push(format!("levels{sep}{}", l.join(",")));
    }
    if let Some(t) = &def.options.time {
        out.push(format!("time{sep}{t}"));
    }
    if let Some(e) = &def.options.expiry {
        out.push(format!("expiry{sep}{e}"));
    }
    if let Some([a, b, c, d]) = def.options.space {
        out.push(format!("space{sep}{a},{b},{c},{d}"));
    }
    out
}

/// A one-line description of an index: `btree on age, name`, `rtree on
/// loc (reconcile antimatter)`, `ngram on text (gram 3, reconcile
/// deleted-keys)`.
pub fn describe(def: &IndexDef) -> String {
    let opts = option_parts(def, " ");
    let mut s = format!("{} on {}", def.kind, def.fields.join(", "));
    if !opts.is_empty() {
        s.push_str(&format!(" ({})", opts.join(", ")));
    }
    s
}

/// A dataset's ttl in words: `expiry at until, clock unix_us` or
/// `30 past t, grace 5`; `clock`: the clock to name, if any.
pub fn ttl(t: &silt::TtlDef, clock: Option<&str>) -> String {
    let mut s = match (&t.expiry, &t.time, t.after) {
        (Some(e), _, _) => format!("expiry at {e}"),
        (None, Some(f), Some(a)) => format!("{a} past {f}"),
        _ => "none".to_owned(),
    };
    if let Some(c) = clock {
        s.push_str(&format!(", clock {c}"));
    }
    if t.grace != 0 {
        s.push_str(&format!(", grace {}", t.grace));
    }
    s
}
