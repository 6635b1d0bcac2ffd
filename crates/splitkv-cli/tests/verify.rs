//! `verify` on a clean database (exit 0) and on one with a flipped byte in an SSTable or in a
//! value-log segment (non-zero exit; the report names the damaged file and the offset).

mod common;

use common::{build_db, files_with_ext, flip_byte, outcome, splitkv, temp_db, TestResult};

#[test]
fn clean_database_verifies() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let out = splitkv(["verify".as_ref(), db.as_os_str()])?;
    let (code, stdout, _) = outcome(&out);
    assert_eq!(code, Some(0), "{:?}", outcome(&out));
    assert!(stdout.contains("no problems"), "{stdout}");
    assert!(stdout.contains("205 keys read through the database"), "{stdout}");

    let out = splitkv(["verify".as_ref(), "--json".as_ref(), db.as_os_str()])?;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["ok"], true);
    assert_eq!(report["checked"]["keys"], 205);
    assert!(report["checked"]["tables"].as_u64() >= Some(1));
    assert!(report["checked"]["records"].as_u64() >= Some(205));
    Ok(())
}

#[test]
fn flipped_byte_in_an_sstable_is_reported_with_file_and_offset() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let tables = files_with_ext(&db, "sst")?;
    let table = tables.first().ok_or("no SSTable was written")?;
    // 205 entries of ~110 bytes fill several 4 KiB data blocks; this byte is in the second one.
    let damaged_at = 5000;
    assert!(std::fs::metadata(table)?.len() > 8000);
    flip_byte(table, damaged_at)?;

    let out = splitkv(["verify".as_ref(), db.as_os_str()])?;
    let (code, stdout, _) = outcome(&out);
    assert_ne!(code, Some(0), "{stdout}");
    let name = table.file_name().and_then(|n| n.to_str()).ok_or("file name")?;
    let line = stdout.lines().find(|l| l.starts_with("PROBLEM") && l.contains(name)).ok_or(stdout.clone())?;
    assert!(line.contains("at offset "), "{line}");

    let out = splitkv(["verify".as_ref(), "--json".as_ref(), db.as_os_str()])?;
    assert_ne!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let problem = report["problems"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["file"].as_str().is_some_and(|f| f.ends_with(name))))
        .ok_or("no problem names the table")?;
    // The offset is that of the damaged block: after the first block, at or before the byte.
    let offset = problem["offset"].as_u64().ok_or("problem has an offset")?;
    assert!(offset > 0 && offset <= damaged_at as u64, "offset {offset}");
    Ok(())
}

#[test]
fn flipped_byte_in_a_segment_is_reported_with_file_and_offset() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let segments = files_with_ext(&db, "vlog")?;
    let segment = segments.first().ok_or("no segment was written")?;
    // Segment header (24 bytes), then the first record's 26-byte header and its key: this byte
    // is in the key of the first record, at offset 24.
    flip_byte(segment, 24 + 26 + 2)?;

    let out = splitkv(["verify".as_ref(), db.as_os_str()])?;
    let (code, stdout, _) = outcome(&out);
    assert_ne!(code, Some(0), "{stdout}");
    let name = segment.file_name().and_then(|n| n.to_str()).ok_or("file name")?;
    assert!(
        stdout.lines().any(|l| l.starts_with("PROBLEM") && l.contains(name) && l.contains("at offset 24:")),
        "{stdout}"
    );
    Ok(())
}

#[test]
fn damaged_value_behind_a_pointer_is_found_through_the_database() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let segments = files_with_ext(&db, "vlog")?;
    let segment = segments.first().ok_or("no segment was written")?;
    // The last record of the first segment is `big4`'s 2000-byte value; damage its middle.
    let len = std::fs::metadata(segment)?.len() as usize;
    flip_byte(segment, len - 1000)?;

    let out = splitkv(["verify".as_ref(), "--json".as_ref(), db.as_os_str()])?;
    assert_ne!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let problems = report["problems"].as_array().ok_or("problems")?;
    // Once by the segment scan and once when the pointer to it is read.
    assert_eq!(problems.len(), 2, "{report:#}");
    assert!(problems.iter().all(|p| p["offset"] == problems[0]["offset"]), "{report:#}");

    let out = splitkv(["verify".as_ref(), "--files-only".as_ref(), "--json".as_ref(), db.as_os_str()])?;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["problems"].as_array().map(Vec::len), Some(1), "{report:#}");
    Ok(())
}

#[test]
fn torn_tail_past_the_log_head_is_a_note_but_before_it_a_problem() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    // A later, unflushed write lands in a new segment past the log head.
    let reopened = common::reopen(&db, splitkv::Options::default())?;
    reopened.put("late", vec![b'L'; 1000])?;
    reopened.close()?;
    let segments = files_with_ext(&db, "vlog")?;
    let (first, newest) = (segments.first().ok_or("segments")?, segments.last().ok_or("segments")?);
    assert_ne!(first, newest, "the reopened database wrote a new segment");
    let truncate = |path: &std::path::Path, by: u64| -> std::io::Result<()> {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        let len = file.metadata()?.len();
        file.set_len(len - by)
    };

    // As a crash mid-append would leave it: recovery drops the record, nothing is lost.
    truncate(newest, 10)?;
    let out = splitkv(["verify".as_ref(), db.as_os_str()])?;
    let (code, stdout, _) = outcome(&out);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("note: ") && stdout.contains("torn record"), "{stdout}");
    assert!(stdout.contains("no problems"), "{stdout}");

    // Records before the head are referenced by SSTables: a cut there is damage.
    std::fs::remove_file(newest)?;
    truncate(first, 10)?;
    let out = splitkv(["verify".as_ref(), db.as_os_str()])?;
    let (code, stdout, _) = outcome(&out);
    assert_eq!(code, Some(1), "{stdout}");
    let name = first.file_name().and_then(|n| n.to_str()).ok_or("file name")?;
    assert!(stdout.lines().any(|l| l.starts_with("PROBLEM") && l.contains(name)), "{stdout}");
    Ok(())
}
