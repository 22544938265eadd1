//! The text form of a merge policy: [`MergePolicy::parse`] reads a
//! user-facing spec such as `tiered(4)`, `prefix(1GB,5)` or
//! `leveled(4,10,64MB,256MB,str,round_robin)`, and `Display` writes the form
//! `parse` reads back. Sizes are plain bytes or carry a binary unit
//! (`parse_size`, `format_size`).

use std::fmt;

use super::leveled::{self, leveled_with};
use super::{GIB, KIB, MIB, MergePolicy, Partitioning, Pick, TIB};
use crate::error::{Error, Result};

/// The forms [`MergePolicy::parse`] accepts; quoted in every parse error.
const ACCEPTED_FORMS: &str = "accepted forms: no-merge | constant(K) | prefix(MAX_MERGABLE_SIZE,MAX_TOLERANCE_COUNT) \
     | binomial(K) | tiered(B) | concurrent | concurrent(K,C,D,LAMBDA) | leveled | leveled(L0_TRIGGER,FANOUT) \
     | leveled(L0_TRIGGER,FANOUT,TARGET_FILE_SIZE) | leveled(L0_TRIGGER,FANOUT,TARGET_FILE_SIZE,L1_SIZE) \
     | leveled(L0_TRIGGER,FANOUT,TARGET_FILE_SIZE,L1_SIZE,size|str|rstar_grove[,min_overlap|round_robin]); \
     sizes are plain bytes or carry a B/KB/MB/GB/TB suffix (binary multiples, case-insensitive), e.g. prefix(1GB,5)";

impl MergePolicy {
    /// Parse a user-facing spec: `no-merge`, `constant(5)`, `prefix(1GB,5)`,
    /// `binomial(4)`, `tiered(4)`, `concurrent` (defaults) or
    /// `concurrent(30,3,10,1.2)`, `leveled` (defaults), `leveled(4,10)`,
    /// `leveled(4,10,64MB)` or `leveled(4,10,64MB,256MB)`.
    ///
    /// Names are case-insensitive (`_` may replace `-`), spaces around
    /// arguments are ignored, and `prefix` alone means the default
    /// `prefix(1GB,5)`. Sizes are plain bytes or carry a `B`, `KB`, `MB`, `GB`
    /// or `TB` suffix (binary multiples; `K`/`KiB` etc. also accepted). When
    /// the L1 size of `leveled` is omitted it is `l0_trigger * target_file_size`
    /// (256MB with the defaults, as RocksDB). The result is validated; a bad
    /// spec gives [`Error::Config`] listing the accepted forms.
    pub fn parse(spec: &str) -> Result<MergePolicy> {
        let err = |why: String| {
            Error::Config(format!(
                "invalid merge policy `{spec}`: {why}; {ACCEPTED_FORMS}"
            ))
        };
        let s = spec.trim();
        let (name, args): (&str, Vec<&str>) = match s.find('(') {
            Some(open) => {
                let inner = s[open + 1..]
                    .strip_suffix(')')
                    .ok_or_else(|| err("missing closing parenthesis".into()))?;
                (s[..open].trim(), inner.split(',').map(str::trim).collect())
            }
            None => (s, Vec::new()),
        };
        let name = name.to_ascii_lowercase().replace('_', "-");
        let count = |n: &str| -> Result<usize> {
            n.parse::<usize>()
                .map_err(|_| err(format!("`{n}` is not a non-negative integer")))
        };
        let size = |n: &str| -> Result<u64> { parse_size(n).map_err(&err) };
        let policy = match (name.as_str(), args.as_slice()) {
            ("no-merge" | "nomerge", []) => MergePolicy::NoMerge,
            ("constant", [k]) => MergePolicy::Constant { k: count(k)? },
            ("prefix", []) => MergePolicy::default(),
            ("prefix", [m, c]) => MergePolicy::Prefix {
                max_mergable_bytes: size(m)?,
                max_tolerance_count: count(c)?,
            },
            ("binomial", [k]) => MergePolicy::Binomial { k: count(k)? },
            ("tiered", [b]) => MergePolicy::Tiered { b: count(b)? },
            ("concurrent", []) => MergePolicy::default_concurrent(),
            ("concurrent", [k, c, d, lambda]) => MergePolicy::Concurrent {
                k: count(k)?,
                c: count(c)?,
                d: count(d)?,
                lambda: lambda
                    .parse::<f64>()
                    .map_err(|_| err(format!("`{lambda}` is not a number")))?,
            },
            ("leveled", []) => MergePolicy::default_leveled(),
            ("leveled", [l0, fanout]) => leveled_with(
                count(l0)?,
                count(fanout)?,
                leveled::DEFAULT_TARGET_FILE_BYTES,
                None,
            ),
            ("leveled", [l0, fanout, target]) => {
                leveled_with(count(l0)?, count(fanout)?, size(target)?, None)
            }
            ("leveled", [l0, fanout, target, l1]) => {
                leveled_with(count(l0)?, count(fanout)?, size(target)?, Some(size(l1)?))
            }
            ("leveled", [l0, fanout, target, l1, part, rest @ ..]) if rest.len() <= 1 => {
                let partitioning = Partitioning::parse(part).ok_or_else(|| {
                    err(format!(
                        "unknown leveled partitioning `{part}`; use size, str or rstar_grove"
                    ))
                })?;
                let pick = match rest.first() {
                    None => Pick::MinOverlap,
                    Some(pk) => Pick::parse(pk).ok_or_else(|| {
                        err(format!(
                            "unknown leveled pick `{pk}`; use min_overlap or round_robin"
                        ))
                    })?,
                };
                match leveled_with(count(l0)?, count(fanout)?, size(target)?, Some(size(l1)?)) {
                    MergePolicy::Leveled {
                        l0_trigger,
                        fanout,
                        target_file_bytes,
                        l1_bytes,
                        ..
                    } => MergePolicy::Leveled {
                        l0_trigger,
                        fanout,
                        target_file_bytes,
                        l1_bytes,
                        partitioning,
                        pick,
                    },
                    other => other,
                }
            }
            (
                "no-merge" | "nomerge" | "constant" | "prefix" | "binomial" | "tiered"
                | "concurrent" | "leveled",
                _,
            ) => {
                return Err(err(format!(
                    "wrong number of arguments ({}) for `{name}`",
                    args.len()
                )));
            }
            _ => return Err(err(format!("unknown policy name `{name}`"))),
        };
        policy.check().map_err(err)?;
        Ok(policy)
    }
}

impl Partitioning {
    /// The partitioning a spec names (case-insensitive, `-` for `_`, aliases).
    fn parse(s: &str) -> Option<Partitioning> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "size" => Some(Partitioning::Size),
            "str" => Some(Partitioning::Str),
            "rstar_grove" | "r*_grove" | "rstargrove" | "grove" => Some(Partitioning::RstarGrove),
            _ => None,
        }
    }
}

impl Pick {
    /// The pick a spec names (case-insensitive, `-` for `_`, aliases).
    fn parse(s: &str) -> Option<Pick> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "min_overlap" | "pick_best" | "best" => Some(Pick::MinOverlap),
            "round_robin" | "roundrobin" | "rr" => Some(Pick::RoundRobin),
            _ => None,
        }
    }
}

impl fmt::Display for MergePolicy {
    /// The spec form accepted by [`MergePolicy::parse`]; `parse(&p.to_string())`
    /// gives back `p` for every valid policy. Optional arguments are always
    /// written out, e.g. `concurrent(30,3,10,1.2)` and `leveled(4,10,64MB,256MB)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergePolicy::NoMerge => write!(f, "no-merge"),
            MergePolicy::Constant { k } => write!(f, "constant({k})"),
            MergePolicy::Prefix {
                max_mergable_bytes,
                max_tolerance_count,
            } => write!(
                f,
                "prefix({},{max_tolerance_count})",
                format_size(*max_mergable_bytes)
            ),
            MergePolicy::Binomial { k } => write!(f, "binomial({k})"),
            MergePolicy::Tiered { b } => write!(f, "tiered({b})"),
            MergePolicy::Concurrent { k, c, d, lambda } => {
                write!(f, "concurrent({k},{c},{d},{lambda})")
            }
            MergePolicy::Leveled {
                l0_trigger,
                fanout,
                target_file_bytes,
                l1_bytes,
                partitioning,
                pick,
            } => {
                write!(
                    f,
                    "leveled({l0_trigger},{fanout},{},{}",
                    format_size(*target_file_bytes),
                    format_size(*l1_bytes)
                )?;
                if *partitioning != Partitioning::Size || *pick != Pick::MinOverlap {
                    write!(f, ",{}", partitioning.name())?;
                }
                if *pick != Pick::MinOverlap {
                    write!(f, ",{}", pick.name())?;
                }
                write!(f, ")")
            }
        }
    }
}

/// Parse a size: plain bytes, or digits followed by a (case-insensitive) unit
/// `B`, `K`/`KB`/`KiB`, `M`/`MB`/`MiB`, `G`/`GB`/`GiB`, `T`/`TB`/`TiB`; units are
/// binary multiples. Returns a human-readable reason on failure.
fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return Err(format!(
            "`{text}` is not a size (expected e.g. 1048576, 512KB, 64MB, 1GB)"
        ));
    }
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("size `{text}` is too large"))?;
    let mult = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => KIB,
        "M" | "MB" | "MIB" => MIB,
        "G" | "GB" | "GIB" => GIB,
        "T" | "TB" | "TIB" => TIB,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{text}` (use B, KB, MB, GB or TB)"
            ));
        }
    };
    value
        .checked_mul(mult)
        .ok_or_else(|| format!("size `{text}` is too large"))
}

/// Format a size with the largest unit that divides it exactly (`1GB`,
/// `64MB`, `1536KB`), else as plain bytes; round-trips with [`parse_size`].
fn format_size(bytes: u64) -> String {
    if bytes == 0 {
        return "0".to_owned();
    }
    for (unit, mult) in [("TB", TIB), ("GB", GIB), ("MB", MIB), ("KB", KIB)] {
        if bytes.is_multiple_of(mult) {
            return format!("{}{unit}", bytes / mult);
        }
    }
    bytes.to_string()
}
