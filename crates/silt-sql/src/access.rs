//! Access control: roles, grants, and what a session's role may run.
//!
//! A session with no role (the embedded engine, `silt query`, a server
//! with no users) may do everything. A session that logged in as a role
//! (see [`crate::SqlSession::set_user`]) runs a statement only if the role
//! holds every privilege it needs, checked on the statement's plan before
//! anything runs, so that no form gets around it (subqueries, views, CTEs,
//! `EXPLAIN [ANALYZE]` of a write, `INSERT ... SELECT`, transaction blocks):
//!
//! | Statement | Needs |
//! |-----------|-------|
//! | a scan of table `t` (`SELECT`, a subquery, `UPDATE`/`DELETE` rows) | read on `t` |
//! | `INSERT`, `UPSERT`, `UPDATE`, `DELETE` on `t` | write on `t` |
//! | `CREATE INDEX`, `DROP INDEX`, `COMPACT`, `DROP TABLE` on `t` | DDL on `t` |
//! | `CREATE TABLE`, `CREATE VIEW`, other `CREATE`/`DROP` | DDL on `*` |
//! | `CREATE`/`ALTER`/`DROP ROLE`, `GRANT`, `REVOKE` | admin |
//! | `CREATE EXTERNAL TABLE`, `COPY ... TO 'file'` | admin, and server files enabled ([`FileAccess`]) |
//!
//! A role that creates a table gets every privilege on it. The SQL forms:
//!
//! - `CREATE ROLE name [WITH] [LOGIN | NOLOGIN] [SUPERUSER | NOSUPERUSER]
//!   [PASSWORD 'p' | PASSWORD NULL]`; `CREATE USER` is the same with
//!   `LOGIN`. `SUPERUSER` makes an admin. The password is kept as a SCRAM
//!   verifier ([`crate::scram`]); a verifier may be given instead.
//! - `ALTER ROLE name [WITH] options` and `ALTER ROLE name RENAME TO new`;
//!   `DROP ROLE [IF EXISTS] name, ...` (also `... USER`).
//! - `GRANT {SELECT | INSERT, UPDATE, DELETE | ALL [PRIVILEGES]}, ... ON
//!   [TABLE] t, ... | ON ALL TABLES IN SCHEMA public TO role, ...`, and
//!   `GRANT CREATE ON SCHEMA public TO role` (DDL on `*`); `REVOKE` the
//!   same `FROM role`. Writes are one privilege: `INSERT`, `UPDATE` and
//!   `DELETE` are granted together (revoking any of them revokes writes).

use std::path::{Component, Path, PathBuf};

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::{DdlStatement, LogicalPlan, WriteOp};
use datafusion::sql::sqlparser::ast::{
    Action, AlterRoleOperation, Expr as SqlExpr, GrantObjects, Grantee, GranteeName, ObjectName,
    ObjectType, Password, Privileges as SqlPrivileges, RoleOption, Statement, Value as SqlValue,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use silt::db::roles::ALL_DATASETS;
use silt::{Database, Privileges, Role};

use crate::ddl::{self, Parsed};
use crate::error::SqlError;
use crate::scram::Verifier;

/// Whether statements may read or write files on the machine running the
/// engine (`CREATE EXTERNAL TABLE`, `COPY ... TO 'file'`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum FileAccess {
    /// Anywhere (the embedded engine: the program owns the machine).
    #[default]
    Anywhere,
    /// Never (`silt serve`'s default).
    Off,
    /// Only below this directory, and (in a session with a role) only for
    /// an admin.
    Within(PathBuf),
}

/// A role statement, parsed.
#[derive(Debug, PartialEq, Eq)]
pub enum RoleStmt {
    Create {
        name: String,
        if_not_exists: bool,
        opts: RoleOpts,
    },
    Alter {
        name: String,
        opts: RoleOpts,
        rename: Option<String>,
    },
    Drop {
        names: Vec<String>,
        if_exists: bool,
    },
    Grant {
        privs: Privileges,
        on: Vec<String>,
        to: Vec<String>,
    },
    Revoke {
        privs: Privileges,
        on: Vec<String>,
        from: Vec<String>,
    },
}

/// The options of `CREATE`/`ALTER ROLE` (unset: unchanged, or the
/// default for a new role).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RoleOpts {
    pub login: Option<bool>,
    pub admin: Option<bool>,
    /// `Some(None)`: `PASSWORD NULL` (no password: cannot log in).
    pub password: Option<Option<String>>,
}

/// The error of a missing privilege (SQLSTATE 42501).
fn denied(msg: String) -> SqlError {
    SqlError::PermissionDenied(msg)
}

fn name_of(n: &ObjectName) -> Result<String, SqlError> {
    ddl::object_parts(n)
        .pop()
        .ok_or_else(|| SqlError::Invalid(format!("bad name `{n}`")))
}

fn text_of(e: &SqlExpr) -> Result<String, SqlError> {
    match e {
        SqlExpr::Value(v) => match &v.value {
            SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => Ok(s.clone()),
            other => Err(SqlError::Invalid(format!(
                "a password must be a quoted string, not `{other}`"
            ))),
        },
        other => Err(SqlError::Invalid(format!(
            "a password must be a quoted string, not `{other}`"
        ))),
    }
}

fn password_of(p: &Password) -> Result<Option<String>, SqlError> {
    match p {
        Password::Password(e) => text_of(e).map(Some),
        Password::NullPassword => Ok(None),
    }
}

fn options(opts: &[RoleOption]) -> Result<RoleOpts, SqlError> {
    let mut o = RoleOpts::default();
    for opt in opts {
        match opt {
            RoleOption::Login(b) => o.login = Some(*b),
            RoleOption::SuperUser(b) => o.admin = Some(*b),
            RoleOption::Password(p) => o.password = Some(password_of(p)?),
            // PostgreSQL's other attributes mean nothing here; accept the
            // harmless ones that tools send.
            RoleOption::Inherit(_) => {}
            other => {
                return Err(SqlError::Unsupported(format!(
                    "role option {other}; Silt roles have LOGIN, SUPERUSER and PASSWORD"
                )));
            }
        }
    }
    Ok(o)
}

fn grantees(g: &[Grantee]) -> Result<Vec<String>, SqlError> {
    g.iter()
        .map(|g| match &g.name {
            Some(GranteeName::ObjectName(n)) => name_of(n),
            _ => Err(SqlError::Unsupported(format!("grantee `{g}`"))),
        })
        .collect()
}

/// The privileges of a `GRANT`/`REVOKE`, and whether they are on a
/// schema (`CREATE ON SCHEMA`).
fn privileges(p: &SqlPrivileges, revoke: bool) -> Result<Privileges, SqlError> {
    let actions = match p {
        SqlPrivileges::All { .. } => return Ok(Privileges::ALL),
        SqlPrivileges::Actions(a) => a,
    };
    let mut out = Privileges::default();
    let (mut ins, mut upd, mut del) = (false, false, false);
    for a in actions {
        match a {
            Action::Select { columns: None } => out.read = true,
            Action::Insert { columns: None } => ins = true,
            Action::Update { columns: None } => upd = true,
            Action::Delete | Action::Truncate => del = true,
            Action::Create { .. } => out.ddl = true,
            other => {
                return Err(SqlError::Unsupported(format!(
                    "privilege {other}; Silt grants SELECT, INSERT/UPDATE/DELETE (together), CREATE ON SCHEMA and ALL"
                )));
            }
        }
    }
    if ins || upd || del {
        let all_three = ins && upd && del;
        if !(revoke || all_three) {
            return Err(SqlError::Unsupported(
                "granting only some of INSERT, UPDATE and DELETE: writes are one privilege in Silt; grant INSERT, UPDATE, DELETE together".to_owned(),
            ));
        }
        out.write = true;
    }
    Ok(out)
}

/// The datasets a `GRANT`/`REVOKE` is on (`*` for all tables or the
/// schema).
fn objects(o: &Option<GrantObjects>, privs: Privileges) -> Result<Vec<String>, SqlError> {
    match o {
        Some(GrantObjects::Tables(t)) => {
            if privs.ddl && privs != Privileges::ALL {
                return Err(SqlError::Unsupported(
                    "CREATE on a table; grant CREATE ON SCHEMA public (every table), or ALL on the table".to_owned(),
                ));
            }
            t.iter().map(name_of).collect()
        }
        Some(GrantObjects::AllTablesInSchema { .. }) | Some(GrantObjects::Schemas(_)) => {
            Ok(vec![ALL_DATASETS.to_owned()])
        }
        other => Err(SqlError::Unsupported(format!(
            "privileges on {}; grant on tables, ALL TABLES IN SCHEMA public, or SCHEMA public",
            other
                .as_ref()
                .map_or("nothing".to_owned(), |o| o.to_string())
        ))),
    }
}

/// Recognize a role statement by its first words (upper-cased) and parse
/// it (PostgreSQL's grammar); `None`: not a role statement.
pub fn parse_text(words: &[&str], text: &str) -> Result<Option<RoleStmt>, SqlError> {
    let user_form = match words {
        ["CREATE" | "ALTER" | "DROP", "USER", ..] => true,
        ["CREATE" | "ALTER" | "DROP", "ROLE", ..] | ["GRANT" | "REVOKE", ..] => false,
        _ => return Ok(None),
    };
    let text = if user_form {
        // `... USER` is `... ROLE` (with LOGIN for CREATE).
        let t = text.trim_start();
        let first = t.find(char::is_whitespace).unwrap_or(t.len());
        let rest = t[first..].trim_start();
        format!("{} ROLE{}", &t[..first], rest.get(4..).unwrap_or(""))
    } else {
        text.to_owned()
    };
    let stmts = Parser::parse_sql(&PostgreSqlDialect {}, &text).map_err(|e| {
        SqlError::Parse(
            e.to_string()
                .trim_start_matches("sql parser error: ")
                .to_owned(),
        )
    })?;
    let [stmt] = stmts.as_slice() else {
        return Err(SqlError::Parse("expected one statement".to_owned()));
    };
    if let Statement::Drop {
        object_type: ObjectType::Role,
        if_exists,
        names,
        ..
    } = stmt
    {
        return Ok(Some(RoleStmt::Drop {
            names: names.iter().map(name_of).collect::<Result<_, _>>()?,
            if_exists: *if_exists,
        }));
    }
    match parse(stmt, user_form)? {
        Some(r) => Ok(Some(r)),
        None => Err(SqlError::Unsupported(format!("`{stmt}`"))),
    }
}

/// Recognize a parsed role statement (`None`: not one). `user_form`: the
/// statement was written `... USER` (so `CREATE` implies `LOGIN`).
fn parse(stmt: &Statement, user_form: bool) -> Result<Option<RoleStmt>, SqlError> {
    Ok(Some(match stmt {
        Statement::CreateRole(c) => {
            let [name] = c.names.as_slice() else {
                return Err(SqlError::Unsupported(
                    "CREATE ROLE creates one role at a time".to_owned(),
                ));
            };
            let unsupported = [
                (c.create_db == Some(true), "CREATEDB"),
                (c.create_role == Some(true), "CREATEROLE"),
                (c.replication == Some(true), "REPLICATION"),
                (c.bypassrls == Some(true), "BYPASSRLS"),
                (c.connection_limit.is_some(), "CONNECTION LIMIT"),
                (c.valid_until.is_some(), "VALID UNTIL"),
                (
                    !(c.in_role.is_empty()
                        && c.in_group.is_empty()
                        && c.role.is_empty()
                        && c.user.is_empty()
                        && c.admin.is_empty()),
                    "role membership",
                ),
            ];
            if let Some((_, what)) = unsupported.iter().find(|(set, _)| *set) {
                return Err(SqlError::Unsupported(format!(
                    "role option {what}; Silt roles have LOGIN, SUPERUSER and PASSWORD"
                )));
            }
            RoleStmt::Create {
                name: name_of(name)?,
                if_not_exists: c.if_not_exists,
                opts: RoleOpts {
                    login: c.login.or(user_form.then_some(true)),
                    admin: c.superuser,
                    password: c.password.as_ref().map(password_of).transpose()?,
                },
            }
        }
        Statement::AlterRole { name, operation } => match operation {
            AlterRoleOperation::WithOptions { options: o } => RoleStmt::Alter {
                name: ddl::ident(name),
                opts: options(o)?,
                rename: None,
            },
            AlterRoleOperation::RenameRole { role_name } => RoleStmt::Alter {
                name: ddl::ident(name),
                opts: RoleOpts::default(),
                rename: Some(ddl::ident(role_name)),
            },
            other => {
                return Err(SqlError::Unsupported(format!("ALTER ROLE ... {other}")));
            }
        },
        Statement::Grant(g) => {
            let privs = privileges(&g.privileges, false)?;
            RoleStmt::Grant {
                privs,
                on: objects(&g.objects, privs)?,
                to: grantees(&g.grantees)?,
            }
        }
        Statement::Revoke(r) => {
            let privs = privileges(&r.privileges, true)?;
            RoleStmt::Revoke {
                privs,
                on: objects(&r.objects, Privileges::default())?,
                from: grantees(&r.grantees)?,
            }
        }
        _ => return Ok(None),
    }))
}

/// The role a session runs as, read afresh for each statement (so that a
/// `REVOKE` or `DROP ROLE` applies to open sessions at once). `None`: no
/// role, every right.
pub fn principal(db: &Database, user: Option<&str>) -> Result<Option<Role>, SqlError> {
    let Some(user) = user else {
        return Ok(None);
    };
    db.role(user).map(Some).ok_or_else(|| {
        SqlError::Auth(format!(
            "role \"{user}\" no longer exists; reconnect as another role"
        ))
    })
}

/// `who` may write rows of `table` (`COPY ... FROM`).
pub fn check_write(who: &Role, table: &str) -> Result<(), SqlError> {
    need(who, table, WRITE, "write")
}

fn need(who: &Role, table: &str, p: Privileges, what: &str) -> Result<(), SqlError> {
    if who.privileges_on(table).covers(p) {
        Ok(())
    } else {
        Err(denied(format!(
            "permission denied: role \"{}\" may not {what} table \"{table}\"; an admin can GRANT it",
            who.name
        )))
    }
}

fn need_admin(who: &Role, what: &str) -> Result<(), SqlError> {
    if who.admin {
        Ok(())
    } else {
        Err(denied(format!(
            "permission denied: only an admin (SUPERUSER) role may {what}"
        )))
    }
}

const READ: Privileges = Privileges {
    read: true,
    write: false,
    ddl: false,
};
const WRITE: Privileges = Privileges {
    read: false,
    write: true,
    ddl: false,
};
const DDL: Privileges = Privileges {
    read: false,
    write: false,
    ddl: true,
};

/// Check a statement the SQL layer runs itself (not a DataFusion plan:
/// those go through [`check_plan`]).
pub fn check_parsed(who: &Role, parsed: &Parsed) -> Result<(), SqlError> {
    match parsed {
        Parsed::Compact(t) => need(who, t, DDL, "compact"),
        Parsed::CreateTable(_) => need(who, ALL_DATASETS, DDL, "create a table like"),
        Parsed::PubSub(_) => need(
            who,
            ALL_DATASETS,
            DDL,
            "create or drop a pub/sub space like",
        ),
        Parsed::Sequence(_) => need(
            who,
            ALL_DATASETS,
            DDL,
            "create, alter or drop a sequence like",
        ),
        Parsed::CreateIndex(ci) => {
            let t = name_of(&ci.table_name)?;
            need(who, &t, DDL, "create an index on")
        }
        Parsed::DropTables { names, .. }
        | Parsed::DropViews { names, .. }
        | Parsed::DropMaterialized { names, .. } => {
            names.iter().try_for_each(|t| need(who, t, DDL, "drop"))
        }
        // It copies the tables it joins: reading them all is needed too.
        Parsed::CreateMaterialized(_) => {
            need(who, ALL_DATASETS, DDL, "create a materialized view like")?;
            need(who, ALL_DATASETS, READ, "read into a materialized view")
        }
        Parsed::DropIndex { table, .. } => match table {
            Some(t) => need(who, t, DDL, "drop an index of"),
            None => need(who, ALL_DATASETS, DDL, "drop an index of"),
        },
        // A cursor's query is checked when it is declared.
        Parsed::Cursor(_) => Ok(()),
        Parsed::Alter(a) => need(who, &a.table, DDL, "alter"),
        Parsed::Dml(d) => need(who, &name_of(&d.table)?, WRITE, "change"),
        Parsed::Truncate(names) => names
            .iter()
            .try_for_each(|t| need(who, t, WRITE, "truncate")),
        Parsed::Role(_) => need_admin(who, "manage roles and grants"),
        // Checked on their plan.
        Parsed::Insert(_) | Parsed::DataFusion(_) | Parsed::Copy(_) => Ok(()),
        Parsed::Begin
        | Parsed::Commit
        | Parsed::Rollback
        | Parsed::Savepoint(_)
        | Parsed::RollbackTo(_)
        | Parsed::Release(_) => Ok(()),
    }
}

/// Lexically normalize a path (`.` and `..` resolved without the file
/// system), so that `dir/../etc` cannot pass for a path below `dir`.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Whether a statement may use the file at `location`.
pub fn check_file(
    files: &FileAccess,
    who: Option<&Role>,
    location: &str,
    what: &str,
) -> Result<(), SqlError> {
    let dir = match files {
        FileAccess::Anywhere => return Ok(()),
        FileAccess::Off => {
            return Err(denied(format!(
                "{what} reads or writes files on the server, which this server does not allow (start it with --server-files DIR to allow them below DIR, for admins)"
            )));
        }
        FileAccess::Within(d) => d,
    };
    if let Some(w) = who {
        need_admin(w, what)?;
    }
    let path = location.strip_prefix("file://").unwrap_or(location);
    if path.contains("://") {
        return Err(denied(format!(
            "{what}: `{location}` is not a local path below the server files directory"
        )));
    }
    let p = Path::new(path);
    let abs = if p.is_absolute() {
        normalize(p)
    } else {
        normalize(&dir.join(p))
    };
    // Resolve symbolic links of the part that exists.
    let resolved = abs
        .ancestors()
        .find_map(|a| {
            a.canonicalize()
                .ok()
                .map(|c| c.join(abs.strip_prefix(a).unwrap_or(Path::new(""))))
        })
        .unwrap_or(abs.clone());
    let root = dir.canonicalize().unwrap_or_else(|_| normalize(dir));
    if resolved.starts_with(&root) {
        Ok(())
    } else {
        Err(denied(format!(
            "{what}: `{location}` is outside the server files directory {}",
            root.display()
        )))
    }
}

/// Check a DataFusion plan: every table it scans or writes, its DDL, and
/// its use of server files.
pub fn check_plan(
    who: Option<&Role>,
    files: &FileAccess,
    plan: &LogicalPlan,
) -> Result<(), SqlError> {
    let mut err = None;
    let r = plan.apply_with_subqueries(|node| {
        let r = check_node(who, files, node);
        match r {
            Ok(()) => Ok(TreeNodeRecursion::Continue),
            Err(e) => {
                err = Some(e);
                Ok(TreeNodeRecursion::Stop)
            }
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    r.map(|_| ()).map_err(SqlError::from)
}

/// Whether a scan reads PostgreSQL's catalog (`pg_catalog.pg_class`, or
/// `pg_class` unqualified when no dataset has that name), which every role
/// may read, as in PostgreSQL: it names tables, columns and indexes, not
/// their rows.
fn is_catalog(s: &datafusion::logical_expr::TableScan) -> bool {
    let in_catalog_schema = matches!(s.table_name.schema(), None | Some("pg_catalog"));
    let dataset = crate::rules::silt_table(s).is_some();
    in_catalog_schema && !dataset && crate::pg_catalog::is_relation(s.table_name.table())
}

/// Check that `who` may read (and with `write`, write) every dataset of
/// `datasets` (`what`: the action, for the message).
pub fn check_datasets(
    who: &Role,
    datasets: &[String],
    write: bool,
    what: &str,
) -> Result<(), SqlError> {
    for d in datasets {
        need(who, d, READ, what)?;
        if write {
            need(who, d, WRITE, what)?;
        }
    }
    Ok(())
}

/// The pub/sub operation a scan calls, if it is one (`crate::pubsub`).
fn pubsub_call(
    s: &datafusion::logical_expr::TableScan,
) -> Option<std::sync::Arc<dyn datafusion::datasource::TableProvider>> {
    let p = datafusion::datasource::source_as_provider(&s.source).ok()?;
    let any: &dyn std::any::Any = p.as_ref();
    any.is::<crate::pubsub::PubSubCall>().then_some(p)
}

fn check_node(who: Option<&Role>, files: &FileAccess, node: &LogicalPlan) -> Result<(), SqlError> {
    match node {
        LogicalPlan::Ddl(DdlStatement::CreateExternalTable(c)) => {
            for l in &c.locations {
                check_file(files, who, l, "CREATE EXTERNAL TABLE")?
            }
        }
        LogicalPlan::Copy(c) => check_file(files, who, &c.output_url, "COPY ... TO a file")?,
        _ => {}
    }
    let Some(who) = who else {
        return Ok(());
    };
    match node {
        LogicalPlan::TableScan(s) if pubsub_call(s).is_some() => {
            let p = pubsub_call(s);
            if let Some(call) = p.as_ref().and_then(|p| {
                (p.as_ref() as &dyn std::any::Any).downcast_ref::<crate::pubsub::PubSubCall>()
            }) {
                let (datasets, writes) = call.needs();
                check_datasets(
                    who,
                    &datasets,
                    writes,
                    &format!("call {} on", call.function()),
                )?;
            }
        }
        LogicalPlan::TableScan(s) => {
            if s.table_name.schema() != Some("information_schema") && !is_catalog(s) {
                need(who, s.table_name.table(), READ, "read")?;
            }
            // A view's scan reads the tables of its definition.
            if let Some(inner) = s.source.get_logical_plan() {
                check_plan(Some(who), files, &inner)?;
            }
        }
        LogicalPlan::Dml(d) => {
            let t = d.table_name.table();
            match d.op {
                WriteOp::Ctas => need(who, ALL_DATASETS, DDL, "create a table like")?,
                _ => need(who, t, WRITE, "write to")?,
            }
        }
        LogicalPlan::Ddl(d) => match d {
            DdlStatement::DropTable(t) => need(who, t.name.table(), DDL, "drop")?,
            DdlStatement::DropView(v) => need(who, v.name.table(), DDL, "drop")?,
            _ => need(who, ALL_DATASETS, DDL, "create or drop objects like")?,
        },
        _ => {}
    }
    Ok(())
}

/// Run a role statement on the database as `who` (`None`: no role, every
/// right). `who` must be an admin.
pub fn run(db: &Database, who: Option<&Role>, stmt: RoleStmt) -> Result<(), SqlError> {
    if let Some(w) = who {
        need_admin(w, "manage roles and grants")?;
    }
    let before_admins = login_admins(db);
    let me = who.map(|w| w.name.clone());
    match stmt {
        RoleStmt::Create {
            name,
            if_not_exists,
            opts,
        } => {
            if if_not_exists && db.role(&name).is_some() {
                return Ok(());
            }
            let mut r = Role::new(&name);
            apply(&mut r, opts)?;
            db.create_role(r)?;
        }
        RoleStmt::Alter { name, opts, rename } => {
            if rename.is_some() && me.as_deref() == Some(name.as_str()) {
                return Err(SqlError::Invalid(
                    "the current role cannot be renamed; connect as another admin".to_owned(),
                ));
            }
            // Hash before taking the catalog (PBKDF2 takes a while).
            let verifier = match opts.password {
                Some(Some(p)) => Some(Some(Verifier::from_password_or_verifier(&p)?.to_string())),
                Some(None) => Some(None),
                None => None,
            };
            if let Some(r) = db.role(&name)
                && is_login_admin(&r)
                && before_admins == 1
                && (opts.login == Some(false)
                    || opts.admin == Some(false)
                    || verifier == Some(None))
            {
                return Err(SqlError::Invalid(LAST_ADMIN.to_owned()));
            }
            db.update_role(&name, |r| {
                if let Some(l) = opts.login {
                    r.login = l;
                }
                if let Some(a) = opts.admin {
                    r.admin = a;
                }
                if let Some(v) = verifier {
                    r.verifier = v;
                }
                if let Some(n) = rename {
                    r.name = n;
                }
                Ok(())
            })?;
        }
        RoleStmt::Drop { names, if_exists } => {
            for n in &names {
                if me.as_deref() == Some(n.as_str()) {
                    return Err(SqlError::Invalid(
                        "the current role cannot be dropped; connect as another admin".to_owned(),
                    ));
                }
                if db.role(n).is_none() && !if_exists {
                    return Err(silt::Error::NoSuchRole(n.clone()).into());
                }
            }
            let dropped_admins = names
                .iter()
                .filter(|n| db.role(n).is_some_and(|r| is_login_admin(&r)))
                .count();
            if dropped_admins > 0 && dropped_admins >= before_admins {
                return Err(SqlError::Invalid(LAST_ADMIN.to_owned()));
            }
            for n in names {
                if db.role(&n).is_some() {
                    db.drop_role(&n)?;
                }
            }
        }
        RoleStmt::Grant { privs, on, to } => change_grants(db, privs, &on, &to, true)?,
        RoleStmt::Revoke { privs, on, from } => change_grants(db, privs, &on, &from, false)?,
    }
    Ok(())
}

fn is_login_admin(r: &Role) -> bool {
    r.admin && r.login && r.verifier.is_some()
}

/// The admin roles that can log in.
fn login_admins(db: &Database) -> usize {
    db.roles().iter().filter(|r| is_login_admin(r)).count()
}

const LAST_ADMIN: &str = "this would leave no admin role that can log in, and nobody could manage roles any more; create another admin first (or use `silt user` on the stopped database)";

fn apply(r: &mut Role, opts: RoleOpts) -> Result<(), SqlError> {
    if let Some(l) = opts.login {
        r.login = l;
    }
    if let Some(a) = opts.admin {
        r.admin = a;
    }
    match opts.password {
        Some(Some(p)) => r.verifier = Some(Verifier::from_password_or_verifier(&p)?.to_string()),
        Some(None) => r.verifier = None,
        None => {}
    }
    Ok(())
}

fn change_grants(
    db: &Database,
    privs: Privileges,
    on: &[String],
    roles: &[String],
    grant: bool,
) -> Result<(), SqlError> {
    let tables = db.dataset_names();
    for t in on {
        if t != ALL_DATASETS && !tables.contains(t) {
            return Err(silt::Error::NoSuchDataset(t.clone()).into());
        }
    }
    for r in roles {
        if db.role(r).is_none() {
            return Err(silt::Error::NoSuchRole(r.clone()).into());
        }
    }
    for r in roles {
        db.update_role(r, |role| {
            for t in on {
                let cur = role.grants.get(t).copied().unwrap_or_default();
                let new = if grant {
                    cur.union(privs)
                } else {
                    cur.minus(privs)
                };
                if new.is_empty() {
                    role.grants.remove(t);
                } else {
                    role.grants.insert(t.clone(), new);
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// After `who` created table `t`: it gets every privilege on it.
pub fn owner_grants(db: &Database, who: Option<&Role>, t: &str) -> Result<(), SqlError> {
    match who {
        Some(w) if !w.admin => {
            db.update_role(&w.name, |r| {
                r.grants.insert(t.to_owned(), Privileges::ALL);
                Ok(())
            })?;
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(sql: &str) -> Result<Option<RoleStmt>, SqlError> {
        let words: Vec<String> = sql
            .split_whitespace()
            .take(3)
            .map(|w| w.to_ascii_uppercase())
            .collect();
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        parse_text(&w, sql)
    }

    #[test]
    fn role_statements() {
        match p("CREATE USER ann WITH PASSWORD 'x'").unwrap() {
            Some(RoleStmt::Create { name, opts, .. }) => {
                assert_eq!(name, "ann");
                assert_eq!(opts.login, Some(true));
                assert_eq!(opts.password, Some(Some("x".into())));
            }
            other => panic!("{other:?}"),
        }
        match p("CREATE ROLE r NOLOGIN SUPERUSER").unwrap() {
            Some(RoleStmt::Create { opts, .. }) => {
                assert_eq!(opts.login, Some(false));
                assert_eq!(opts.admin, Some(true));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            p("ALTER ROLE r RENAME TO s").unwrap(),
            Some(RoleStmt::Alter { rename: Some(n), .. }) if n == "s"
        ));
        assert!(matches!(
            p("ALTER USER r WITH PASSWORD NULL").unwrap(),
            Some(RoleStmt::Alter {
                opts: RoleOpts {
                    password: Some(None),
                    ..
                },
                ..
            })
        ));
        assert_eq!(
            p("DROP ROLE IF EXISTS a, b").unwrap(),
            Some(RoleStmt::Drop {
                names: vec!["a".into(), "b".into()],
                if_exists: true
            })
        );
        assert_eq!(
            p("GRANT SELECT ON t, u TO a").unwrap(),
            Some(RoleStmt::Grant {
                privs: READ,
                on: vec!["t".into(), "u".into()],
                to: vec!["a".into()]
            })
        );
        assert_eq!(
            p("GRANT ALL PRIVILEGES ON ALL TABLES IN SCHEMA public TO a").unwrap(),
            Some(RoleStmt::Grant {
                privs: Privileges::ALL,
                on: vec![ALL_DATASETS.into()],
                to: vec!["a".into()]
            })
        );
        assert_eq!(
            p("GRANT CREATE ON SCHEMA public TO a").unwrap(),
            Some(RoleStmt::Grant {
                privs: DDL,
                on: vec![ALL_DATASETS.into()],
                to: vec!["a".into()]
            })
        );
        assert_eq!(
            p("REVOKE DELETE ON t FROM a").unwrap(),
            Some(RoleStmt::Revoke {
                privs: WRITE,
                on: vec!["t".into()],
                from: vec!["a".into()]
            })
        );
        assert!(matches!(
            p("GRANT INSERT ON t TO a"),
            Err(SqlError::Unsupported(_))
        ));
        assert!(matches!(
            p("CREATE ROLE r CREATEDB"),
            Err(SqlError::Unsupported(_))
        ));
        assert!(matches!(
            p("CREATE ROLE r PASSWORD 5"),
            Err(SqlError::Invalid(_))
        ));
        assert!(p("SELECT 1").unwrap().is_none());
        assert!(p("CREATE TABLE t (a INT)").unwrap().is_none());
    }

    #[test]
    fn server_file_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        let within = FileAccess::Within(root.clone());
        let admin = Role {
            admin: true,
            ..Role::new("a")
        };
        let user = Role::new("u");
        let ok = |loc: &str| check_file(&within, Some(&admin), loc, "X").is_ok();
        assert!(ok(&root.join("sub/x.csv").display().to_string()));
        assert!(ok("sub/x.csv"));
        assert!(ok(&format!("file://{}/x.csv", root.display())));
        assert!(!ok("/etc/passwd"));
        assert!(!ok(&format!("{}/sub/../../x.csv", root.display())));
        assert!(!ok("../x.csv"));
        assert!(!ok("s3://b/x.csv"));
        // A symbolic link out of the directory does not count as inside.
        std::os::unix::fs::symlink("/etc", root.join("out")).unwrap();
        assert!(!ok("out/passwd"));
        // Only admins; off means off; anywhere means anywhere.
        assert!(check_file(&within, Some(&user), "sub/x.csv", "X").is_err());
        assert!(check_file(&FileAccess::Off, None, "/tmp/x", "X").is_err());
        assert!(check_file(&FileAccess::Anywhere, Some(&user), "/etc/passwd", "X").is_ok());
    }
}
