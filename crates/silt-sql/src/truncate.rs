//! `TRUNCATE`. Outside a transaction block each table is emptied at once
//! (`Database::truncate_dataset`: a new empty generation of the dataset,
//! one catalog write), not row by row. Inside a block it deletes every row
//! through the block's transaction, so that `ROLLBACK` brings them back, as
//! PostgreSQL's does.

use std::sync::Arc;

use crate::bounds::StatementControl;
use crate::ddl;
use crate::error::SqlError;
use crate::session::SqlSession;

impl crate::SqlEngine {
    pub(crate) async fn truncate(
        &self,
        names: Vec<String>,
        session: &SqlSession,
        ctl: Option<&Arc<StatementControl>>,
    ) -> Result<(), SqlError> {
        // Every table first: a missing one changes nothing.
        for n in &names {
            self.db.dataset(n)?;
        }
        if session.slot().is_some() {
            for n in names {
                let sql = format!("DELETE FROM \"{}\"", n.replace('"', "\"\""));
                for seg in ddl::split(&sql)? {
                    let out = Box::pin(self.run(&seg, session, ctl)).await?;
                    Box::pin(self.collect(out, ctl)).await?;
                }
            }
            return Ok(());
        }
        for n in names {
            let db = self.db.clone();
            ddl::blocking(move || db.truncate_dataset(&n).map_err(SqlError::from)).await?;
        }
        // Views hold plans of the old datasets.
        self.reload_views();
        Ok(())
    }
}
