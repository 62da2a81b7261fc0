//! Schema migrations: append-only, numbered, applied with `rusqlite_migration` (which keeps
//! the version in SQLite's `user_version`). Never edit a shipped migration; add a new file
//! `migrations/000N_*.sql` and append it to [`STEPS`].

use rusqlite::Connection;
use rusqlite_migration::{M, Migrations};

use crate::error::{Error, Result, SqlContext};

/// Every migration, in order. Index `i` takes the schema from version `i` to `i + 1`.
const STEPS: &[M<'static>] = &[
    M::up(include_str!("../migrations/0001_initial.sql")),
    M::up(include_str!("../migrations/0002_consent_deciders.sql")),
    M::up(include_str!("../migrations/0003_attachments.sql")),
    M::up(include_str!("../migrations/0004_tool_call_status.sql")),
];

/// The migration set.
pub fn migrations() -> Migrations<'static> {
    Migrations::from_slice(STEPS)
}

/// Number of migrations this build knows (the newest schema version).
pub fn latest_version() -> usize {
    STEPS.len()
}

/// The schema version recorded in the database (0 for a new file).
pub fn current_version(conn: &Connection) -> Result<usize> {
    let v: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .ctx(|| "read schema version".to_owned())?;
    Ok(usize::try_from(v).unwrap_or(usize::MAX))
}

/// Brings the schema to the newest version, refusing a database from a newer build.
pub fn migrate(conn: &mut Connection) -> Result<()> {
    let found = current_version(conn)?;
    if found > latest_version() {
        return Err(Error::SchemaTooNew {
            found,
            known: latest_version(),
        });
    }
    migrations().to_latest(conn)?;
    Ok(())
}
