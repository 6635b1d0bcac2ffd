//! The tool on hash-index databases: `get`, `scan`, `info`, `verify` and `dump HASHINDEX` on a
//! database written by the library (long keys, deletes, writes past the last checkpoint);
//! `verify` on a table damaged byte by byte; and creating one with `put --index hash`.

mod common;

use std::path::Path;

use common::{build_hash_db, expected_value, flip_byte, long_key, outcome, splitkv, temp_db, TestResult};
use serde_json::Value;

/// Keys in the table after [`build_hash_db`]'s checkpoint: 190 `keyNNN`, 5 `bigN`, 9 long keys.
const TABLE_ENTRIES: u64 = 204;
/// Byte offset of the key bytes within a 64-byte slot (see docs/format/hashtable.md).
const SLOT_KEY_OFFSET: u64 = 40;
/// Byte offset of the payload (sequence number, pointer) within a slot.
const SLOT_PAYLOAD_OFFSET: u64 = 16;

fn json_of(out: &std::process::Output) -> Result<Value, Box<dyn std::error::Error>> {
    assert_eq!(out.status.code(), Some(0), "{:?}", outcome(out));
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// `dump --json` of the table file of `db`.
fn dump_table(db: &Path) -> Result<Value, Box<dyn std::error::Error>> {
    let table = db.join("HASHINDEX");
    json_of(&splitkv(["dump".as_ref(), "--json".as_ref(), table.as_os_str()])?)
}

/// The file offset of the slot holding `key` (an inline key), from the dump.
fn slot_offset_of(dump: &Value, key: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let slots = dump["slots"].as_array().ok_or("slots")?;
    let slot = slots.iter().find(|s| s["key"] == key).ok_or(format!("no slot for {key}"))?;
    Ok(slot["offset"].as_u64().ok_or("offset")?)
}

#[test]
fn get_and_scan_read_the_table_and_the_log_tail() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_hash_db(&db)?;
    let d = db.as_os_str();
    for key in ["key000", "big3", &long_key(7), "late"] {
        let out = splitkv(["get".as_ref(), d, key.as_ref()])?;
        assert_eq!(out.status.code(), Some(0), "{key}: {:?}", outcome(&out));
        let mut want = expected_value(key);
        want.push(b'\n');
        assert_eq!(out.stdout, want, "value of {key}");
    }
    for gone in ["key015", "key020", &long_key(3)] {
        let out = splitkv(["get".as_ref(), d, gone.as_ref()])?;
        assert_eq!(out.status.code(), Some(1), "{gone} was deleted: {:?}", outcome(&out));
    }

    let out = splitkv(["scan".as_ref(), d, "--keys-only".as_ref()])?;
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, Some(0), "{stderr}");
    let keys: Vec<&str> = stdout.lines().collect();
    assert_eq!(keys.len(), 204, "189 keyNNN, 5 bigN, 9 long keys and late");
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "scan is in key order");
    assert_eq!(keys.first(), Some(&long_key(0).as_str()));
    assert!(!keys.contains(&"key020") && keys.contains(&"late"));
    Ok(())
}

#[test]
fn info_shows_the_hash_table() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_hash_db(&db)?;
    let names_before = std::fs::read_dir(&db)?.count();
    let info = json_of(&splitkv(["info".as_ref(), "--json".as_ref(), db.as_os_str()])?)?;
    assert_eq!(info["index"], "hash");
    let table = &info["hash_table"];
    assert_eq!(table["entries"], TABLE_ENTRIES, "{info:#}");
    assert_eq!(table["tombstones"], 0);
    let buckets = table["buckets"].as_u64().ok_or("buckets")?;
    assert!(buckets > 16, "the 16-bucket table grew: {info:#}");
    assert_eq!(table["file_bytes"], 4096 + 128 * buckets);
    assert_eq!(table["load_factor"].as_f64(), Some(TABLE_ENTRIES as f64 / buckets as f64));
    assert!(table["collision_used"].as_u64() > Some(0), "keys share chains: {info:#}");
    assert_eq!(info["space"]["hash_table_bytes"], table["file_bytes"]);
    assert_eq!(info["unflushed_log"]["records"], 2, "the delete of key020 and the put of late");
    assert_eq!(std::fs::read_dir(&db)?.count(), names_before, "info created or removed files");

    let (code, stdout, _) = outcome(&splitkv(["info".as_ref(), db.as_os_str()])?);
    assert_eq!(code, Some(0));
    for needle in ["index     hash table", "entries          204 (0 tombstones)", "load factor", "collision slots"] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    assert!(!stdout.contains("level  files"), "no LSM levels for a hash database:\n{stdout}");
    Ok(())
}

#[test]
fn clean_hash_database_verifies() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_hash_db(&db)?;
    let (code, stdout, _) = outcome(&splitkv(["verify".as_ref(), db.as_os_str()])?);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("hash table (204 slots)") && stdout.contains("no problems"), "{stdout}");
    assert!(stdout.contains("204 keys read through the database"), "{stdout}");

    let report = json_of(&splitkv(["verify".as_ref(), "--json".as_ref(), db.as_os_str()])?)?;
    assert_eq!(report["ok"], true);
    assert_eq!(report["checked"]["hash_slots"], TABLE_ENTRIES);
    Ok(())
}

#[test]
fn dump_lists_every_slot_and_the_chains() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_hash_db(&db)?;
    let dump = dump_table(&db)?;
    assert_eq!(dump["format_version"], 1);
    assert_eq!(dump["entries"], TABLE_ENTRIES);
    let buckets = dump["buckets"].as_u64().ok_or("buckets")?;
    let slots = dump["slots"].as_array().ok_or("slots")?;
    assert_eq!(slots.len() as u64, TABLE_ENTRIES);
    assert!(slots.iter().all(|s| s["state"] == "value" && s["payload_intact"] == true), "{dump:#}");

    let key000 = slots.iter().find(|s| s["key"] == "key000").ok_or("key000")?;
    assert!(key000["pointer"]["len"].as_u64() > Some(100));
    assert!(key000["sequence"].as_u64() >= Some(1));
    let index = key000["slot"].as_u64().ok_or("slot")?;
    assert_eq!(key000["offset"], 4096 + 64 * index);

    // A long key shows its stored prefix and hash; its whole key lives only in the log.
    let long = slots.iter().find(|s| s["long_key"] == true).ok_or("no long key")?;
    assert_eq!(long["key_prefix"], &long_key(0)[..16]);
    assert_eq!(long["key_hash"].as_str().map(str::len), Some(16));
    assert_eq!(slots.iter().filter(|s| s["long_key"] == true).count(), 9);

    // Collision slots follow their chain's `next` links; every chain is counted.
    let collision = slots.iter().filter(|s| s["region"] == "collision").count() as u64;
    assert!(collision > 0 && collision < TABLE_ENTRIES, "{dump:#}");
    assert!(slots.iter().any(|s| s["next"].as_u64() >= Some(buckets)), "some chain links on: {dump:#}");
    let by_keys = dump["chains"]["buckets_by_keys"].as_array().ok_or("buckets_by_keys")?;
    let counted: u64 = by_keys.iter().enumerate().map(|(keys, n)| keys as u64 * n.as_u64().unwrap_or(0)).sum();
    assert_eq!(counted, TABLE_ENTRIES);
    assert_eq!(dump["chains"]["longest"]["keys"].as_u64(), Some(by_keys.len() as u64 - 1));

    let table = db.join("HASHINDEX");
    let (code, stdout, stderr) = outcome(&splitkv(["dump".as_ref(), table.as_os_str()])?);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].contains(&format!("hash table format version 1, {buckets} buckets")), "{stdout}");
    let row = format!("slot {index} bucket ");
    assert!(lines.iter().any(|l| l.starts_with(&row) && l.contains(" value key000 @")), "{stdout}");
    assert!(stdout.contains("(long key, hash "), "{stdout}");
    assert!(lines.last().is_some_and(|l| l.starts_with("chains: ") && l.contains("the longest holds")), "{stdout}");

    // --hex spells keys in hex, and the named subcommand reads the same file.
    let out = splitkv(["dump".as_ref(), "hash-table".as_ref(), "--hex".as_ref(), table.as_os_str()])?;
    let (code, stdout, _) = outcome(&out);
    assert_eq!(code, Some(0));
    assert!(stdout.contains(" value 6b6579303030 @"), "key000 in hex:\n{stdout}");
    Ok(())
}

#[test]
fn damaged_slot_key_is_reported_with_file_and_offset() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_hash_db(&db)?;
    let slot = slot_offset_of(&dump_table(&db)?, "key042")?;
    let table = db.join("HASHINDEX");
    flip_byte(&table, (slot + SLOT_KEY_OFFSET + 2) as usize)?;

    let (code, stdout, _) = outcome(&splitkv(["verify".as_ref(), db.as_os_str()])?);
    assert_eq!(code, Some(1), "{stdout}");
    let expected = format!("HASHINDEX at offset {slot}: slot key checksum mismatch");
    assert!(stdout.lines().any(|l| l.starts_with("PROBLEM") && l.contains(&expected)), "{stdout}");

    // The damaged table no longer opens; dump lists its slots in file order and says why.
    let out = splitkv(["dump".as_ref(), table.as_os_str()])?;
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, Some(3), "{stdout}");
    assert!(stdout.contains("does not open") && stdout.contains("does not decode"), "{stdout}");
    assert!(stdout.contains(" value key000 @"), "intact slots are still listed:\n{stdout}");
    assert!(stderr.contains("slot key checksum mismatch"), "{stderr}");
    Ok(())
}

#[test]
fn torn_slot_payload_is_a_problem_unless_the_log_tail_rewrites_it() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_hash_db(&db)?;
    let dump = dump_table(&db)?;
    let table = db.join("HASHINDEX");
    // `key020` was deleted after the checkpoint: opening replays that delete over its slot.
    // `key042` has no later record, so nothing would repair it.
    flip_byte(&table, (slot_offset_of(&dump, "key020")? + SLOT_PAYLOAD_OFFSET) as usize)?;
    flip_byte(&table, (slot_offset_of(&dump, "key042")? + SLOT_PAYLOAD_OFFSET) as usize)?;

    let report = splitkv(["verify".as_ref(), "--files-only".as_ref(), "--json".as_ref(), db.as_os_str()])?;
    assert_eq!(report.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&report.stdout)?;
    let problems = report["problems"].as_array().ok_or("problems")?;
    assert_eq!(problems.len(), 1, "{report:#}");
    let reason = problems[0]["reason"].as_str().ok_or("reason")?;
    assert!(reason.contains("key key042") && reason.contains("torn payload"), "{reason}");
    assert_eq!(problems[0]["offset"].as_u64(), Some(slot_offset_of(&dump, "key042")?));
    let notes = report["notes"].as_array().ok_or("notes")?;
    assert!(notes.iter().any(|n| n.as_str().is_some_and(|n| n.starts_with("1 hash slots are torn"))), "{report:#}");
    Ok(())
}

#[test]
fn slot_pointing_at_another_keys_record_is_reported() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_hash_db(&db)?;
    let dump = dump_table(&db)?;
    let table = db.join("HASHINDEX");
    // Give key100's slot key050's payload (its checksum covers only state and payload, so the
    // slot stays well formed): the slot now names a record of another key.
    let (from, to) = (slot_offset_of(&dump, "key050")?, slot_offset_of(&dump, "key100")?);
    let mut bytes = std::fs::read(&table)?;
    let (from, to) = (from as usize, to as usize);
    let payload = bytes[from + 8..from + 36].to_vec();
    // Bytes 8..16 hold state, key length and the payload checksum; the key length is the same
    // (6) for both keys.
    bytes[to + 8..to + 36].copy_from_slice(&payload);
    std::fs::write(&table, bytes)?;

    let (code, stdout, _) = outcome(&splitkv(["verify".as_ref(), "--files-only".as_ref(), db.as_os_str()])?);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("PROBLEM")
            && l.contains(&format!("HASHINDEX at offset {to}: "))
            && l.contains("key key100")
            && l.contains("holds another key, key050")),
        "{stdout}"
    );
    Ok(())
}

#[test]
fn put_creates_a_hash_database_and_info_says_so() -> TestResult {
    let (_tmp, db) = temp_db()?;
    let d = db.as_os_str();
    let out = splitkv(["put".as_ref(), "--index".as_ref(), "hash".as_ref(), d, "color".as_ref(), "blue".as_ref()])?;
    assert_eq!(out.status.code(), Some(0), "{:?}", outcome(&out));
    assert!(db.join("HASHINDEX").exists());
    let out = splitkv(["put".as_ref(), d, "shape".as_ref(), "round".as_ref()])?;
    assert_eq!(out.status.code(), Some(0), "an existing hash database opens without --index: {:?}", outcome(&out));
    let out = splitkv(["get".as_ref(), d, "color".as_ref()])?;
    assert_eq!(outcome(&out), (Some(0), "blue\n".into(), String::new()));

    let info = json_of(&splitkv(["info".as_ref(), "--json".as_ref(), d])?)?;
    assert_eq!(info["index"], "hash");
    assert!(info["hash_table"]["buckets"].as_u64() > Some(0));
    let (_, stdout, _) = outcome(&splitkv(["info".as_ref(), d])?);
    assert!(stdout.contains("index     hash table"), "{stdout}");
    let out = splitkv(["verify".as_ref(), d])?;
    assert_eq!(out.status.code(), Some(0), "{:?}", outcome(&out));

    // A database keeps the index it was created with.
    let out = splitkv(["put".as_ref(), "--index".as_ref(), "lsm".as_ref(), d, "k".as_ref(), "v".as_ref()])?;
    let (code, _, stderr) = outcome(&out);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("holds a database with the hash index"), "{stderr}");

    // Without --index, a new database is an LSM one.
    let (_tmp2, lsm) = temp_db()?;
    let out = splitkv(["put".as_ref(), lsm.as_os_str(), "k".as_ref(), "v".as_ref()])?;
    assert_eq!(out.status.code(), Some(0));
    assert!(!lsm.join("HASHINDEX").exists());
    let info = json_of(&splitkv(["info".as_ref(), "--json".as_ref(), lsm.as_os_str()])?)?;
    assert_eq!(info["index"], "lsm");
    assert_eq!(info["hash_table"], Value::Null);
    Ok(())
}
