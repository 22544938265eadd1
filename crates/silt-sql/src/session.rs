//! SQL sessions: one client's open transaction and its state, as
//! PostgreSQL keeps them.
//!
//! - Outside a transaction block every statement commits on its own
//!   (record-level transactions, the engine's fast path).
//! - `BEGIN` / `START TRANSACTION` opens a [`silt::Transaction`]: the
//!   statements that follow buffer their writes in it and read through it
//!   (their own writes included); `COMMIT` applies it atomically and
//!   durably; `ROLLBACK` forgets it. `SAVEPOINT`, `ROLLBACK TO SAVEPOINT`
//!   and `RELEASE SAVEPOINT` work inside it.
//! - A statement that fails inside a block puts the session in the *failed*
//!   state: every statement but `ROLLBACK` (or `ROLLBACK TO SAVEPOINT`) is
//!   refused with SQLSTATE 25P02 until then, and `COMMIT` rolls back.
//! - A commit that finds a key it read changed by another transaction fails
//!   with [`silt::Error::Conflict`] (SQLSTATE 40001): nothing was applied,
//!   run the transaction again.
//! - DDL (`CREATE`, `DROP`, `COMPACT`) inside a block takes effect at once
//!   and is not undone by `ROLLBACK`.
//!
//! - A session may run as a role ([`SqlSession::set_user`]); every
//!   statement is then checked against its privileges ([`crate::access`]).
//!
//! The open transaction reaches the table providers through the DataFusion
//! session config of each statement ([`TxnSlot`] as an extension).

use std::sync::Arc;

use datafusion::config::ConfigOptions;
use datafusion::prelude::SessionConfig;
use parking_lot::Mutex;
use silt::Transaction;

/// Where a session stands, as PostgreSQL's ReadyForQuery tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    /// No transaction block: statements commit on their own.
    Idle,
    /// Inside a transaction block.
    InTransaction,
    /// Inside a block where a statement failed: only `ROLLBACK` helps.
    Failed,
}

/// The open transaction of a session, shared with the statements that run
/// in it (scans read through it, sinks write into it).
pub struct TxnSlot {
    tx: Mutex<Option<Transaction>>,
}

impl std::fmt::Debug for TxnSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TxnSlot")
    }
}

impl TxnSlot {
    fn new(tx: Transaction) -> TxnSlot {
        TxnSlot {
            tx: Mutex::new(Some(tx)),
        }
    }

    /// Run `f` on the transaction (briefly: the lock is held while it
    /// runs). The writes `f` made are then checked against the unique
    /// indexes (`Transaction::check_unique`): a duplicate fails the
    /// statement that wrote it, as in PostgreSQL, not the COMMIT.
    pub fn with<R>(&self, f: impl FnOnce(&mut Transaction) -> silt::Result<R>) -> silt::Result<R> {
        let mut g = self.tx.lock();
        match g.as_mut() {
            Some(t) => {
                let r = f(t)?;
                t.check_unique()?;
                Ok(r)
            }
            None => Err(silt::Error::Txn("the transaction has ended".to_owned())),
        }
    }

    /// Whether the transaction has writes of any of these datasets (by
    /// id) buffered.
    pub(crate) fn wrote_any(&self, datasets: &[u32]) -> bool {
        self.tx
            .lock()
            .as_ref()
            .is_some_and(|t| datasets.iter().any(|d| t.writes_dataset(*d)))
    }

    fn take(&self) -> Option<Transaction> {
        self.tx.lock().take()
    }

    /// The transaction a statement runs in, if any (from its session config).
    pub fn of(cfg: &SessionConfig) -> Option<Arc<TxnSlot>> {
        cfg.get_extension::<TxnSlot>()
    }
}

#[derive(Default)]
struct State {
    tx: Option<Arc<TxnSlot>>,
    failed: bool,
    user: Option<String>,
}

/// One client's session. Statements of one session run one at a time;
/// sessions are independent.
#[derive(Default)]
pub struct SqlSession {
    state: Mutex<State>,
    /// Open cursors (`DECLARE`), by name.
    pub(crate) cursors: Mutex<crate::cursors::Cursors>,
    /// What this session's `nextval` calls returned (`currval`, `lastval`).
    pub(crate) sequences: Arc<crate::sequences::SessionSequences>,
    /// Statements prepared with SQL's `PREPARE`.
    pub(crate) prepared: crate::prepared::Prepared,
    /// The engine's settings with this session's sequences in them, for
    /// statements run from a kept plan ([`SqlSession::statement_config`]).
    kept_config: Mutex<Option<KeptConfig>>,
    /// One-row inserts learned by template (see `insert::kept`).
    pub(crate) inserts: Mutex<crate::insert::kept::KeptInserts>,
}

/// A statement config made from the engine's options `base`.
struct KeptConfig {
    base: Arc<ConfigOptions>,
    config: SessionConfig,
}

impl std::fmt::Debug for SqlSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SqlSession({:?})", self.status())
    }
}

impl SqlSession {
    pub fn new() -> SqlSession {
        SqlSession::default()
    }

    /// The config a statement of this session runs with: the engine's
    /// (`base`) with the session's sequences (`nextval` memory) among its
    /// options. Inserting them copies every DataFusion option
    /// (`SessionConfig::options_mut` is `Arc::make_mut`), so the result is
    /// kept while the engine's options stay the same `Arc`: holding it
    /// makes any change to them (`SET datafusion...`) a new one.
    pub(crate) fn statement_config(&self, base: &SessionConfig) -> SessionConfig {
        let mut kept = self.kept_config.lock();
        if let Some(k) = kept.as_ref()
            && Arc::ptr_eq(&k.base, base.options())
        {
            return k.config.clone();
        }
        let mut config = base.clone();
        config
            .options_mut()
            .extensions
            .insert(crate::sequences::SequencesExt(Some(self.sequences.clone())));
        *kept = Some(KeptConfig {
            base: base.options().clone(),
            config: config.clone(),
        });
        config
    }

    /// The options of [`Self::statement_config`], without a copy of the
    /// rest of the config (a kept insert compares them by pointer).
    pub(crate) fn statement_options(&self, base: &SessionConfig) -> Arc<ConfigOptions> {
        {
            let kept = self.kept_config.lock();
            if let Some(k) = kept.as_ref()
                && Arc::ptr_eq(&k.base, base.options())
            {
                return k.config.options().clone();
            }
        }
        self.statement_config(base).options().clone()
    }

    /// Forget the statements the session prepared with SQL's `PREPARE`
    /// (`DEALLOCATE ALL`).
    pub fn deallocate_all(&self) {
        self.prepared.clear();
    }

    pub fn status(&self) -> TxnStatus {
        let s = self.state.lock();
        match (&s.tx, s.failed) {
            (None, _) => TxnStatus::Idle,
            (Some(_), false) => TxnStatus::InTransaction,
            (Some(_), true) => TxnStatus::Failed,
        }
    }

    /// Run the session's statements as role `user` (its privileges are
    /// checked on every statement: see [`crate::access`]). A session
    /// without a role may do everything.
    pub fn set_user(&self, user: Option<String>) {
        self.state.lock().user = user;
    }

    /// The session's role.
    pub fn user(&self) -> Option<String> {
        self.state.lock().user.clone()
    }

    pub(crate) fn slot(&self) -> Option<Arc<TxnSlot>> {
        self.state.lock().tx.clone()
    }

    /// Open a block (a no-op inside one, as PostgreSQL warns and goes on).
    pub(crate) fn begin(&self, db: &silt::Database) -> silt::Result<()> {
        let mut s = self.state.lock();
        if s.tx.is_none() {
            s.tx = Some(Arc::new(TxnSlot::new(db.begin()?)));
            s.failed = false;
        }
        Ok(())
    }

    /// End the block: the transaction to commit, or `None` when there is
    /// nothing to commit (no block, or a failed one, which rolls back).
    pub(crate) fn end(&self) -> Option<Transaction> {
        // Cursors without HOLD end with their transaction.
        self.cursors.lock().retain(|_, c| c.hold);
        let mut s = self.state.lock();
        let failed = std::mem::take(&mut s.failed);
        let slot = s.tx.take()?;
        let tx = slot.take();
        if failed { None } else { tx }
    }

    /// Put an open block in the failed state (a statement of it failed or
    /// was cancelled); a no-op outside a block.
    pub fn fail(&self) {
        let mut s = self.state.lock();
        if s.tx.is_some() {
            s.failed = true;
        }
    }

    /// `ROLLBACK TO SAVEPOINT`: undo the writes since it and leave the
    /// failed state.
    pub(crate) fn rollback_to(&self, name: &str) -> silt::Result<()> {
        let mut s = self.state.lock();
        let Some(slot) = s.tx.clone() else {
            return Err(no_block("ROLLBACK TO SAVEPOINT"));
        };
        slot.with(|t| t.rollback_to(name))?;
        s.failed = false;
        Ok(())
    }
}

/// The error of a savepoint statement outside a block (SQLSTATE 25P01).
pub(crate) fn no_block(what: &str) -> silt::Error {
    silt::Error::Txn(format!(
        "{what} can only be used in transaction blocks (run BEGIN first)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sequences::SequencesExt;

    fn has_sequences(c: &SessionConfig) -> bool {
        c.options()
            .extensions
            .get::<SequencesExt>()
            .is_some_and(|s| s.0.is_some())
    }

    #[test]
    fn a_statement_config_is_kept_until_the_engine_options_change() {
        let session = SqlSession::new();
        let mut base = SessionConfig::new();
        let a = session.statement_config(&base);
        let b = session.statement_config(&base);
        assert!(has_sequences(&a) && has_sequences(&b));
        // Kept: the same options, not a copy of them.
        assert!(Arc::ptr_eq(a.options(), b.options()));
        assert!(!Arc::ptr_eq(a.options(), base.options()));

        // A change to the engine's options (as `SET` makes) is seen.
        base.options_mut().execution.time_zone = Some("+05:00".to_owned());
        let c = session.statement_config(&base);
        assert_eq!(c.options().execution.time_zone.as_deref(), Some("+05:00"));
        assert!(has_sequences(&c));
        assert!(!Arc::ptr_eq(a.options(), c.options()));
        // The base itself never gets the session's sequences.
        assert!(!has_sequences(&base));
    }
}
