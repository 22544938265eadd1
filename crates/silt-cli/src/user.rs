//! `silt user`: the roles that may log in to `silt serve`, managed on a
//! stopped database (a running server takes `CREATE ROLE`, `ALTER ROLE`,
//! `DROP ROLE`, `GRANT` and `REVOKE` in SQL instead).

use std::io::{BufRead, IsTerminal, Write};

use clap::Subcommand;
use silt::{Database, Role};
use silt_sql::scram::Verifier;

use crate::error::{CliError, CliResult};

#[derive(Subcommand, Debug)]
pub enum UserCommand {
    /// Add a user that can log in (asks for its password).
    Add {
        /// User name (letters, digits, `_`, `-`, `.`).
        name: String,
        /// Every privilege on every table, and manages users and grants.
        #[arg(long)]
        admin: bool,
        /// Read the password from the first line of standard input instead
        /// of asking for it.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Set a user's password (asks for it); its HTTP tokens stop working.
    Passwd {
        name: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Remove a user.
    Drop { name: String },
    /// List the users and roles with their privileges.
    List {
        /// As JSON (passwords are never shown; not even their verifiers).
        #[arg(long)]
        json: bool,
    },
}

pub const USER_HELP: &str = "\
Users are roles that can log in to `silt serve` (SCRAM-SHA-256 over the
PostgreSQL protocol; HTTP Basic or bearer tokens over HTTPS). They live in the
database's catalog; only a verifier of each password is stored. Once a user
exists, the server asks every client for a password and may listen on
non-loopback addresses. An --admin user has every privilege; give other users
privileges with GRANT (connected as an admin):
  GRANT SELECT ON t TO ann;   GRANT INSERT, UPDATE, DELETE ON t TO ann;
  GRANT ALL ON ALL TABLES IN SCHEMA public TO ann;   GRANT CREATE ON SCHEMA public TO ann;

These commands need the database closed (stop the server first); while it
runs, use SQL: CREATE ROLE ann LOGIN PASSWORD '...', ALTER ROLE, DROP ROLE.

Examples:
  silt --db ./mydb user add admin --admin
  echo \"$PW\" | silt --db ./mydb user add ann --password-stdin
  silt --db ./mydb user list";

fn read_password(name: &str, from_stdin: bool) -> CliResult<String> {
    let p = if from_stdin || !std::io::stdin().is_terminal() {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| CliError::Failed(format!("cannot read the password: {e}")))?;
        line.trim_end_matches(['\n', '\r']).to_owned()
    } else {
        let p1 = rpassword::prompt_password(format!("password for {name}: "))
            .map_err(|e| CliError::Failed(format!("cannot read the password: {e}")))?;
        let p2 = rpassword::prompt_password("again: ")
            .map_err(|e| CliError::Failed(format!("cannot read the password: {e}")))?;
        if p1 != p2 {
            return Err(CliError::Usage("the two passwords differ".to_owned()));
        }
        p1
    };
    if p.is_empty() {
        return Err(CliError::Usage(
            "empty password: give one (on standard input with --password-stdin)".to_owned(),
        ));
    }
    Ok(p)
}

fn verifier(password: &str) -> CliResult<String> {
    Verifier::new(password)
        .map(|v| v.to_string())
        .map_err(|e| CliError::Usage(e.to_string()))
}

pub fn run(db: &Database, cmd: &UserCommand) -> CliResult<()> {
    match cmd {
        UserCommand::Add {
            name,
            admin,
            password_stdin,
        } => {
            Role::validate_name(name)?;
            if db.role(name).is_some() {
                return Err(silt::Error::RoleExists(name.clone()).into());
            }
            let v = verifier(&read_password(name, *password_stdin)?)?;
            db.create_role(Role {
                name: name.clone(),
                login: true,
                admin: *admin,
                verifier: Some(v),
                grants: Default::default(),
            })?;
            eprintln!(
                "added {}user {name}; `silt serve` now asks every client for a password",
                if *admin { "admin " } else { "" }
            );
            Ok(())
        }
        UserCommand::Passwd {
            name,
            password_stdin,
        } => {
            if db.role(name).is_none() {
                return Err(CliError::NotFound(format!("no user named `{name}`")));
            }
            let v = verifier(&read_password(name, *password_stdin)?)?;
            db.update_role(name, |r| {
                r.verifier = Some(v);
                r.login = true;
                Ok(())
            })?;
            eprintln!("password of {name} changed");
            Ok(())
        }
        UserCommand::Drop { name } => {
            if db.role(name).is_none() {
                return Err(CliError::NotFound(format!("no user named `{name}`")));
            }
            db.drop_role(name)?;
            eprintln!("dropped user {name}");
            Ok(())
        }
        UserCommand::List { json } => {
            let roles = db.roles();
            let mut out = std::io::stdout().lock();
            if *json {
                let v: Vec<serde_json::Value> = roles
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "name": r.name,
                            "login": r.login && r.verifier.is_some(),
                            "admin": r.admin,
                            "grants": r.grants,
                        })
                    })
                    .collect();
                writeln!(out, "{}", serde_json::Value::Array(v)).map_err(CliError::from_stdout)?;
                return Ok(());
            }
            if roles.is_empty() {
                eprintln!(
                    "no users: `silt serve` asks for no password and listens on loopback only"
                );
                return Ok(());
            }
            for r in roles {
                let mut what = Vec::new();
                if r.admin {
                    what.push("admin".to_owned());
                }
                if !(r.login && r.verifier.is_some()) {
                    what.push("cannot log in".to_owned());
                }
                for (t, p) in &r.grants {
                    let mut ps = Vec::new();
                    if p.read {
                        ps.push("read");
                    }
                    if p.write {
                        ps.push("write");
                    }
                    if p.ddl {
                        ps.push("ddl");
                    }
                    what.push(format!("{t}: {}", ps.join("+")));
                }
                writeln!(out, "{}\t{}", r.name, what.join(", ")).map_err(CliError::from_stdout)?;
            }
            Ok(())
        }
    }
}
