//! LSM inverted indexes on one text field (seed 000 §3.5): entries ⟨token,
//! primary key⟩ with no value, deleted-key reconciliation by default.
//!
//! - **keyword** ([`KEYWORD`]): the words of the text (Unicode letters and
//!   digits, case-folded); a text query asks for records holding all (or
//!   any) of its words, which the entries decide by themselves.
//! - **n-gram** ([`NGRAM`]): the n-grams of the text (case-folded, `gram`
//!   long, default 3); a text query asks for records holding the pattern as
//!   a substring: the records holding all of its grams are candidates,
//!   validated against the record. A pattern shorter than n is looked up as
//!   the prefix of grams.

use super::kind::{IndexOption, IndexType, components, entries_in};
use super::query::{Candidate, IndexOnly, KeyRange, Query, QueryStats, Recheck};
use super::{IndexDef, IndexKind, ReconcileOption};
use crate::error::{Error, Result};
use crate::geo::text::{keyword_tokens, ngram_query_tokens, ngram_tokens};
use crate::lsm::LsmTree;
use crate::lsm::kind::PkSplit;
use crate::value::{self, Value};
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

/// A keyword (`ngram == false`) or n-gram inverted index.
pub struct Inverted {
    ngram: bool,
}

/// The `keyword` kind.
pub static KEYWORD: Inverted = Inverted { ngram: false };
/// The `ngram` kind.
pub static NGRAM: Inverted = Inverted { ngram: true };

/// Tokens a record's text contributes to the inverted index `def`.
pub fn tokens(def: &IndexDef, text: &str) -> Vec<String> {
    if def.kind == IndexKind::Ngram {
        ngram_tokens(text, def.gram())
    } else {
        keyword_tokens(text)
    }
}

/// Tokens a query text looks up (n-gram: the pattern's full grams, or the
/// pattern itself as a gram prefix when it is shorter than n).
pub fn query_tokens(def: &IndexDef, text: &str) -> Vec<String> {
    if def.kind == IndexKind::Ngram {
        ngram_query_tokens(text, def.gram())
    } else {
        keyword_tokens(text)
    }
}

impl IndexType for Inverted {
    fn name(&self) -> &'static str {
        if self.ngram { "ngram" } else { "keyword" }
    }

    fn aliases(&self) -> &'static [&'static str] {
        if self.ngram {
            &["ngram", "n-gram"]
        } else {
            &["keyword", "inverted", "text", "fulltext"]
        }
    }

    fn entries(
        &self,
        def: &IndexDef,
        record: &Value,
        pk: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let field = &def.fields[0];
        let text = match record.get(field) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::String(s)) => s,
            Some(v) => {
                return Err(Error::invalid(
                    Some(field),
                    format!(
                        "the {} index `{}` needs a string, got {}",
                        def.kind,
                        def.name,
                        v.type_name()
                    ),
                ));
            }
        };
        let tokens = tokens(def, text);
        let mut out = Vec::with_capacity(tokens.len());
        for t in tokens {
            let mut k = Vec::with_capacity(t.len() + 2 + pk.len());
            value::encode_key_part(&Value::String(t), &mut k)?;
            k.extend_from_slice(pk);
            out.push((k, Vec::new()));
        }
        out.sort_unstable();
        Ok(out)
    }

    fn pk_split(&self, _def: &IndexDef) -> PkSplit {
        PkSplit::AfterParts(1)
    }

    fn reconcile(&self, def: &IndexDef) -> ReconcileOption {
        def.options
            .reconcile
            .unwrap_or(ReconcileOption::DeletedKeys)
    }

    fn accepts(&self, o: IndexOption) -> bool {
        o == IndexOption::Reconcile || (self.ngram && o == IndexOption::Gram)
    }

    fn check_options(&self, def: &IndexDef) -> Result<()> {
        if self.ngram && !(1..=32).contains(&def.gram()) {
            return Err(Error::Config(format!(
                "n-gram length must be between 1 and 32, got {}",
                def.gram()
            )));
        }
        Ok(())
    }

    fn answers(&self, q: &Query) -> bool {
        matches!(q, Query::Text { .. })
    }

    fn hint(&self) -> &'static str {
        "use a text query"
    }

    fn index_only(&self) -> IndexOnly {
        if self.ngram {
            IndexOnly::Never
        } else {
            IndexOnly::Always
        }
    }

    /// One key range per query token (a gram prefix for a short n-gram
    /// pattern), intersected (all words, n-grams) or united (any word).
    fn candidates(
        &self,
        def: &IndexDef,
        trees: &[Arc<LsmTree>],
        q: &Query,
        _keys: Option<&KeyRange>,
        _exact: bool,
        stats: &mut QueryStats,
    ) -> Result<Vec<Candidate>> {
        let Query::Text { text, all } = q else {
            return Err(Error::invalid(
                None,
                format!(
                    "a {} index does not collect candidates for a {} query",
                    self.name(),
                    q.name()
                ),
            ));
        };
        let tokens = query_tokens(def, text);
        if tokens.is_empty() {
            return Err(Error::invalid(
                None,
                format!("the text query `{text}` has no words to search for"),
            ));
        }
        stats.components += components(trees);
        let split = self.pk_split(def);
        let short_gram = self.ngram && tokens.len() == 1 && tokens[0].chars().count() < def.gram();
        let mut acc: Option<BTreeSet<Vec<u8>>> = None;
        for t in &tokens {
            let mut lo = Vec::new();
            value::encode_key_part(&Value::String(t.clone()), &mut lo)?;
            let hi = if short_gram {
                // Every gram that starts with the pattern: drop the string
                // terminator (0x00 0x01) and bound by 0xFF, which UTF-8
                // never contains.
                lo.truncate(lo.len() - 2);
                let mut h = lo.clone();
                h.push(0xFF);
                h
            } else {
                value::prefix_upper_bound(&lo)
            };
            let entries = entries_in(trees, &Bound::Included(lo), &Bound::Excluded(hi))?;
            stats.candidates += entries.len() as u64;
            let mut pks = BTreeSet::new();
            for k in entries {
                pks.insert(split.pk(&k)?.to_vec());
            }
            let intersect = *all || self.ngram;
            acc = Some(match acc {
                None => pks,
                Some(a) if intersect => a.intersection(&pks).cloned().collect(),
                Some(mut a) => {
                    a.extend(pks);
                    a
                }
            });
        }
        Ok(acc
            .unwrap_or_default()
            .into_iter()
            .map(|pk| Candidate { pk, bounds: None })
            .collect())
    }

    fn recheck(&self, def: &IndexDef, q: &Query, _keys: Option<KeyRange>) -> Result<Recheck> {
        match q {
            Query::Text { text, .. } if self.ngram => Ok(Recheck::Substring(text.clone())),
            Query::Text { text, all } => Ok(Recheck::Words {
                tokens: query_tokens(def, text),
                all: *all,
            }),
            other => Err(Error::invalid(
                None,
                format!(
                    "a {} index cannot re-check a {} query",
                    self.name(),
                    other.name()
                ),
            )),
        }
    }
}
