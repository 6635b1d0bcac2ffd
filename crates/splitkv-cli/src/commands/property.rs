//! `get_property`: one of the engine's named properties (`Db::property`), as RocksDB's `ldb
//! get_property` prints it. Unknown names exit with 1, like a missing key. The database is opened
//! read-only, so this works while another process has it open.

use std::path::Path;

use serde_json::json;

use super::{open_read_only, print_json, CliError, Exit, Output};

/// Prints property `name` of the database at `dir`.
pub fn get_property(dir: &Path, name: &str, out: Output) -> Result<Exit, CliError> {
    let db = open_read_only(dir)?;
    let value = db.property(name);
    db.close()?;
    let Some(value) = value else {
        if out.json {
            print_json(&json!({ "name": name, "found": false }));
        } else {
            eprintln!("unknown property {name}");
        }
        return Ok(Exit::NotFound);
    };
    if out.json {
        print_json(&json!({ "name": name, "found": true, "value": value }));
    } else {
        outln!("{}", value.trim_end_matches('\n'));
    }
    Ok(Exit::Success)
}
