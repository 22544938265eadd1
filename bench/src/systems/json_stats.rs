//! Generic reading of a system's statistics serialized as JSON, so that renamed or
//! added counters never break the build.
// Only the Silt adapter uses this so far (the unit tests run it in every build).
#![cfg_attr(not(feature = "silt"), allow(dead_code))]

use serde_json::Value as Json;

/// Flattens Silt's stats JSON into `(name, value, unit)` triples without relying on
/// exact field names: `datasets[].indexes[]` objects become `dataset.index.field`,
/// numeric leaves are kept, and `components` lists are summarised (count, bytes, entries).
pub fn flatten_stats(json: &Json) -> Vec<(String, f64, String)> {
    let mut out = Vec::new();
    walk(json, "", &mut out);
    out
}

fn walk(json: &Json, path: &str, out: &mut Vec<(String, f64, String)>) {
    let join = |seg: &str| {
        if path.is_empty() {
            seg.to_string()
        } else {
            format!("{path}.{seg}")
        }
    };
    match json {
        Json::Number(n) => {
            if let Some(v) = n.as_f64() {
                let unit = if path.ends_with("bytes") || path.contains("bytes_") {
                    "bytes"
                } else if path.ends_with("amplification") {
                    "x"
                } else {
                    "count"
                };
                out.push((path.to_string(), v, unit.to_string()));
            }
        }
        Json::Bool(b) => out.push((path.to_string(), f64::from(u8::from(*b)), "bool".into())),
        Json::Object(map) => {
            for (k, v) in map {
                // Named containers: the element names carry the meaning.
                if k == "name" {
                    continue;
                }
                let seg = if matches!(k.as_str(), "datasets" | "indexes") {
                    path.to_string()
                } else {
                    join(k)
                };
                if let (true, Json::Array(items)) = (k == "components", v) {
                    summarise_components(items, &seg, out);
                    continue;
                }
                walk(v, &seg, out);
            }
        }
        Json::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let seg = item
                    .get("name")
                    .and_then(Json::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| i.to_string());
                // An element named "kv/p0/primary" inside "kv" replaces it rather than nesting.
                let (parent, last) = path.rsplit_once('.').unwrap_or(("", path));
                let full = if !last.is_empty() && seg.starts_with(&format!("{last}/")) {
                    if parent.is_empty() {
                        seg
                    } else {
                        format!("{parent}.{seg}")
                    }
                } else {
                    join(&seg)
                };
                walk(item, &full, out);
            }
        }
        Json::Null | Json::String(_) => {}
    }
}

fn summarise_components(items: &[Json], path: &str, out: &mut Vec<(String, f64, String)>) {
    let sum = |field: &str| -> f64 {
        items
            .iter()
            .filter_map(|c| c.get(field).and_then(Json::as_f64))
            .sum()
    };
    out.push((path.to_string(), items.len() as f64, "count".into()));
    out.push((
        format!("{path}_size_bytes"),
        sum("size_bytes"),
        "bytes".into(),
    ));
    out.push((format!("{path}_entries"), sum("entries"), "count".into()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattens_dataset_index_stats() {
        let json = serde_json::json!({
            "datasets": [{"name": "kv", "indexes": [{
                "name": "primary", "flushes": 3, "merges": 2, "write_amplification": 2.5,
                "components": [{"size_bytes": 10, "entries": 1, "level": 0},
                               {"size_bytes": 5, "entries": 2, "level": 1}]
            }]}]
        });
        let flat = flatten_stats(&json);
        let get = |n: &str| flat.iter().find(|(k, _, _)| k == n).map(|(_, v, _)| *v);
        assert_eq!(get("kv.primary.flushes"), Some(3.0));
        let nested = serde_json::json!({"datasets": [{"name": "kv", "partitions": 1,
            "indexes": [{"name": "kv/p0/primary", "merges": 4}]}]});
        let flat = flatten_stats(&nested);
        let mut names: Vec<&str> = flat.iter().map(|(k, _, _)| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["kv.partitions", "kv/p0/primary.merges"]);
        assert_eq!(get("kv.primary.write_amplification"), Some(2.5));
        assert_eq!(get("kv.primary.components"), Some(2.0));
        assert_eq!(get("kv.primary.components_size_bytes"), Some(15.0));
    }
}
