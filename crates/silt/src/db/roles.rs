//! Roles: who may log in to a served database and what each may do.
//!
//! The roles live in the catalog (`catalog.json`, field `roles`), so they
//! travel with the database and change atomically with it. The database
//! itself never checks them: an embedding program has every right. The SQL
//! layer (`silt-sql`'s access control) and the server (`silt serve`'s
//! authentication) enforce them.
//!
//! - A role may **log in** when `login` is set and it has a password
//!   verifier. Only the verifier is stored (PostgreSQL's
//!   `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`), never
//!   the password; this module keeps it as an opaque string.
//! - An **admin** role has every privilege on every dataset and may manage
//!   roles and grants (PostgreSQL's superuser).
//! - Other roles hold [`Privileges`] per dataset, or on `*`: every dataset,
//!   present and future. Dropping a dataset drops the grants on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The grant target meaning every dataset, present and future.
pub const ALL_DATASETS: &str = "*";

/// What a role may do with a dataset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Privileges {
    /// Read it (`SELECT`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub read: bool,
    /// Change its records (`INSERT`, `UPSERT`, `UPDATE`, `DELETE`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub write: bool,
    /// Change its definition (`CREATE INDEX`, `DROP`, `COMPACT`; on `*`:
    /// `CREATE TABLE`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub ddl: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Privileges {
    /// Every privilege.
    pub const ALL: Privileges = Privileges {
        read: true,
        write: true,
        ddl: true,
    };

    /// No privilege at all.
    pub fn is_empty(&self) -> bool {
        !(self.read || self.write || self.ddl)
    }

    /// Both sets together.
    pub fn union(self, o: Privileges) -> Privileges {
        Privileges {
            read: self.read || o.read,
            write: self.write || o.write,
            ddl: self.ddl || o.ddl,
        }
    }

    /// `self` without the privileges of `o`.
    pub fn minus(self, o: Privileges) -> Privileges {
        Privileges {
            read: self.read && !o.read,
            write: self.write && !o.write,
            ddl: self.ddl && !o.ddl,
        }
    }

    /// Whether `self` holds every privilege of `o`.
    pub fn covers(&self, o: Privileges) -> bool {
        o.minus(*self).is_empty()
    }
}

/// A role (a user when it may log in).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    /// 1-63 characters of `[A-Za-z0-9_.-]`, not starting with `-`.
    pub name: String,
    /// May open sessions (with its password).
    #[serde(default)]
    pub login: bool,
    /// Every privilege, and manages roles and grants.
    #[serde(default)]
    pub admin: bool,
    /// The password's SCRAM-SHA-256 verifier (never the password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier: Option<String>,
    /// Privileges per dataset name, or on [`ALL_DATASETS`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grants: BTreeMap<String, Privileges>,
}

impl Role {
    /// A role without login, admin or privileges.
    pub fn new(name: &str) -> Role {
        Role {
            name: name.to_owned(),
            ..Role::default()
        }
    }

    /// What this role may do with `dataset`: its grants on it and on `*`
    /// (everything for an admin).
    pub fn privileges_on(&self, dataset: &str) -> Privileges {
        if self.admin {
            return Privileges::ALL;
        }
        let on = |k: &str| self.grants.get(k).copied().unwrap_or_default();
        on(dataset).union(on(ALL_DATASETS))
    }

    /// Check the name (the rules in the module documentation).
    pub fn validate_name(name: &str) -> Result<()> {
        let ok = (1..=63).contains(&name.len())
            && !name.starts_with('-')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if ok {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "bad role name `{name}`: use 1-63 letters, digits, `_`, `-` or `.`, not starting with `-`"
            )))
        }
    }
}
