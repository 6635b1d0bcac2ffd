//! `dump sst|segment|manifest`, `info`, `compact`, `stats` and `gc` on a database written by the
//! library: the JSON output describes what the library wrote.

mod common;

use common::{build_db, files_with_ext, outcome, splitkv, temp_db, TestResult};
use serde_json::Value;

fn json_of(out: &std::process::Output) -> Result<Value, Box<dyn std::error::Error>> {
    assert_eq!(out.status.code(), Some(0), "{:?}", outcome(out));
    Ok(serde_json::from_slice(&out.stdout)?)
}

#[test]
fn dump_sst_lists_every_entry_with_its_kind() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let table = files_with_ext(&db, "sst")?.into_iter().next().ok_or("no SSTable")?;
    let dump = json_of(&splitkv(["dump".as_ref(), "sst".as_ref(), "--json".as_ref(), table.as_os_str()])?)?;
    let records = dump["records"].as_array().ok_or("records")?;
    assert_eq!(records.len(), 205);
    assert_eq!(dump["entries"], 205);
    let big = records.iter().find(|r| r["key"] == "big2").ok_or("big2 missing")?;
    assert_eq!(big["kind"], "pointer");
    assert!(big["pointer"]["len"].as_u64() > Some(2000));
    let small = records.iter().find(|r| r["key"] == "key007").ok_or("key007 missing")?;
    assert_eq!(small["kind"], "inline");
    assert_eq!(small["value"].as_str().map(str::len), Some(100));

    let text = splitkv(["dump".as_ref(), "sst".as_ref(), table.as_os_str()])?;
    let (code, stdout, _) = outcome(&text);
    assert_eq!(code, Some(0));
    assert!(stdout.lines().any(|l| l.starts_with("big2 @") && l.contains(" pointer segment ")), "{stdout}");
    Ok(())
}

#[test]
fn dump_segment_lists_records_at_their_offsets() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let segment = files_with_ext(&db, "vlog")?.into_iter().next().ok_or("no segment")?;
    let dump = json_of(&splitkv(["dump".as_ref(), "segment".as_ref(), "--json".as_ref(), segment.as_os_str()])?)?;
    let records = dump["records"].as_array().ok_or("records")?;
    assert_eq!(records.len(), 205);
    assert_eq!(records[0]["offset"], 24, "first record follows the segment header");
    assert_eq!(records[0]["key"], "key000");
    assert_eq!(records[0]["kind"], "put");
    let second = records[0]["offset"].as_u64().zip(records[0]["len"].as_u64()).map(|(o, l)| o + l);
    assert_eq!(records[1]["offset"].as_u64(), second, "records are laid end to end");
    Ok(())
}

#[test]
fn dump_segment_shows_predecessor_pointers() -> TestResult {
    use splitkv::fs::OsFileSystem;
    use splitkv::types::{SegmentId, SequenceNumber};
    use splitkv::vlog::{RecordRef, ValueLog, VlogOptions};

    // A segment as the hash index writes it: the second version of "k" points at the first.
    let tmp = tempfile::tempdir()?;
    let log = ValueLog::open(OsFileSystem::shared(), tmp.path(), VlogOptions::default())?;
    let first = log.append_batch(&[RecordRef::put(SequenceNumber(1), b"k", b"v1")])?[0];
    let second = RecordRef::put(SequenceNumber(2), b"k", b"v2").with_prev(Some(first));
    let second_ptr = log.append_batch(&[second])?[0];
    log.sync()?;
    let segment = splitkv::filenames::segment_file(tmp.path(), SegmentId(1));

    let (code, stdout, stderr) = outcome(&splitkv(["dump".as_ref(), "segment".as_ref(), segment.as_os_str()])?);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].ends_with("segment 1, format version 3"), "{stdout}");
    assert!(!lines[1].contains("prev="), "{stdout}");
    let link = format!(" prev=1:{}+{} ", first.offset, first.len);
    assert!(lines[2].starts_with(&format!("offset {} ", second_ptr.offset)) && lines[2].contains(&link), "{stdout}");

    let dump = json_of(&splitkv(["dump".as_ref(), "segment".as_ref(), "--json".as_ref(), segment.as_os_str()])?)?;
    let records = dump["records"].as_array().ok_or("records")?;
    assert_eq!(dump["format_version"], 3);
    assert!(records[0].get("prev").is_none());
    assert_eq!(records[1]["prev"]["segment"], 1);
    assert_eq!(records[1]["prev"]["offset"], first.offset);
    assert_eq!(records[1]["prev"]["len"], first.len);
    Ok(())
}

#[test]
fn dump_manifest_shows_the_flushed_table() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let dump = json_of(&splitkv(["dump".as_ref(), "manifest".as_ref(), "--json".as_ref(), db.as_os_str()])?)?;
    let edits = dump["edits"].as_array().ok_or("edits")?;
    let added: Vec<&Value> = edits.iter().flat_map(|e| e["new_files"].as_array().into_iter().flatten()).collect();
    assert_eq!(added.len(), 1, "{dump:#}");
    assert_eq!(added[0]["entries"], 205);
    assert_eq!(dump["end"]["torn_bytes"], 0);
    Ok(())
}

#[test]
fn info_reports_levels_segments_and_sequence_without_changing_files() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let names_before = std::fs::read_dir(&db)?.count();
    let info = json_of(&splitkv(["info".as_ref(), "--json".as_ref(), db.as_os_str()])?)?;
    assert_eq!(info["last_sequence"], 205);
    let levels = info["levels"].as_array().ok_or("levels")?;
    let populated: Vec<&Value> = levels.iter().filter(|l| l["files"] != 0).collect();
    assert_eq!(populated.len(), 1);
    assert_eq!(populated[0]["smallest_key"], "big0");
    assert_eq!(populated[0]["largest_key"], "key199");
    let segments = info["segments"].as_array().ok_or("segments")?;
    assert!(!segments.is_empty());
    assert!(info["space"]["space_amplification"].as_f64() >= Some(1.0));
    assert_eq!(info["options"]["value_threshold"], 512);
    assert_eq!(std::fs::read_dir(&db)?.count(), names_before, "info created or removed files");

    let text = splitkv(["info".as_ref(), db.as_os_str()])?;
    let (_, stdout, _) = outcome(&text);
    for needle in ["log head", "space amplification", "big0 .. key199", "value_threshold = 512"] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    Ok(())
}

#[test]
fn compact_moves_data_down_and_stats_shows_it() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let out = splitkv(["compact".as_ref(), db.as_os_str()])?;
    assert_eq!(out.status.code(), Some(0), "{:?}", outcome(&out));
    let stats = json_of(&splitkv(["stats".as_ref(), "--json".as_ref(), db.as_os_str()])?)?;
    let levels = stats["levels"].as_array().ok_or("levels")?;
    assert_eq!(levels[0]["files"], 0, "level 0 is empty after a full compaction: {stats:#}");
    assert!(levels.iter().skip(1).any(|l| l["files"] != 0));
    assert_eq!(stats["last_sequence"], 205);
    // Compaction keeps every value readable.
    let out = splitkv(["get".as_ref(), db.as_os_str(), "big4".as_ref()])?;
    assert_eq!(out.status.code(), Some(0));
    Ok(())
}

#[test]
fn gc_collects_and_keeps_values_readable() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let out = splitkv(["--json".as_ref(), "gc".as_ref(), db.as_os_str()])?;
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout)?;
    assert!(report["vlog_bytes_after"].as_u64() <= report["vlog_bytes_before"].as_u64(), "{report:#}");
    let out = splitkv(["get".as_ref(), db.as_os_str(), "big4".as_ref()])?;
    assert_eq!(out.status.code(), Some(0));
    let verify = splitkv(["verify".as_ref(), db.as_os_str()])?;
    assert_eq!(verify.status.code(), Some(0), "{}", String::from_utf8_lossy(&verify.stdout));
    Ok(())
}

#[test]
fn rewrite_log_rewrites_in_key_order_and_keeps_values_readable() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let before = splitkv(["get".as_ref(), db.as_os_str(), "big4".as_ref()])?;
    assert_eq!(before.status.code(), Some(0));
    let out = splitkv(["--json".as_ref(), "rewrite-log".as_ref(), db.as_os_str()])?;
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout)?;
    assert!(report["records_rewritten"].as_u64() > Some(0), "{report:#}");
    let after = splitkv(["get".as_ref(), db.as_os_str(), "big4".as_ref()])?;
    assert_eq!(after.stdout, before.stdout, "the value reads back the same");
    // A range given as keys, and the plain-text report.
    let out = splitkv([
        "rewrite-log".as_ref(),
        db.as_os_str(),
        "--from".as_ref(),
        "big".as_ref(),
        "--to".as_ref(),
        "big9".as_ref(),
    ])?;
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("rewrite-log: rewrote "), "{stdout}");
    let verify = splitkv(["verify".as_ref(), db.as_os_str()])?;
    assert_eq!(verify.status.code(), Some(0), "{}", String::from_utf8_lossy(&verify.stdout));
    Ok(())
}

#[test]
fn commands_refuse_a_directory_without_a_database() -> TestResult {
    let (_tmp, db) = temp_db()?;
    std::fs::create_dir_all(&db)?;
    for cmd in ["get", "info", "verify", "scan"] {
        let mut args = vec![cmd.as_ref(), db.as_os_str()];
        if cmd == "get" {
            args.push("k".as_ref());
        }
        let out = splitkv(args)?;
        let (code, _, stderr) = outcome(&out);
        assert_eq!(code, Some(2), "{cmd}: {stderr}");
        assert!(stderr.contains("not a splitkv database"), "{cmd}: {stderr}");
    }
    assert_eq!(std::fs::read_dir(&db)?.count(), 0, "nothing was created");
    Ok(())
}
