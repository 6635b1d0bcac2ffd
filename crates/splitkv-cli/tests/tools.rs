//! The parity commands end to end: `batchput`, `deleterange`, `scan --reverse --max_keys`,
//! `get_property`, and `export` / `import` of the portable pairs file (with a damaged file
//! refused before anything is written).

mod common;

use common::{build_db, expected_value, outcome, splitkv, temp_db, TestResult};

fn run(args: &[&std::ffi::OsStr]) -> std::io::Result<(Option<i32>, String, String)> {
    splitkv(args).map(|out| outcome(&out))
}

#[test]
fn batchput_writes_every_pair_and_rejects_an_odd_count() -> TestResult {
    let (_tmp, db) = temp_db()?;
    let d = db.as_os_str();
    let (code, _, stderr) = run(&["batchput".as_ref(), d, "a".as_ref(), "1".as_ref(), "b".as_ref(), "2".as_ref()])?;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(run(&["scan".as_ref(), d])?.1, "a\t1\nb\t2\n");
    let (code, _, stderr) = run(&["batchput".as_ref(), d, "c".as_ref(), "3".as_ref(), "d".as_ref()])?;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("KEY VALUE"), "{stderr}");
    // Nothing of the refused batch was written.
    assert_eq!(run(&["get".as_ref(), d, "c".as_ref()])?.0, Some(1));
    // Hex works for batches too.
    let (code, _, stderr) = run(&["batchput".as_ref(), "--hex".as_ref(), d, "00ff".as_ref(), "0102".as_ref()])?;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(run(&["get".as_ref(), "--hex".as_ref(), d, "00ff".as_ref()])?.1, "0102\n");
    Ok(())
}

#[test]
fn deleterange_removes_exactly_the_half_open_range() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let d = db.as_os_str();
    let (code, _, stderr) = run(&["deleterange".as_ref(), d, "key010".as_ref(), "key190".as_ref()])?;
    assert_eq!(code, Some(0), "{stderr}");
    let keys = run(&["scan".as_ref(), "--keys-only".as_ref(), d, "--from".as_ref(), "key".as_ref()])?.1;
    let want: Vec<String> = (0..10).chain(190..200).map(|i| format!("key{i:03}")).collect();
    assert_eq!(keys.lines().collect::<Vec<_>>(), want);
    // Keys outside the range, and the values they hold, are untouched.
    assert_eq!(
        run(&["get".as_ref(), d, "key190".as_ref()])?.1.into_bytes(),
        [expected_value("key190"), b"\n".to_vec()].concat()
    );
    assert_eq!(run(&["get".as_ref(), d, "big2".as_ref()])?.0, Some(0));
    Ok(())
}

#[test]
fn scan_goes_backwards_and_stops_at_max_keys() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let d = db.as_os_str();
    let scan = |extra: &[&str]| -> std::io::Result<Vec<String>> {
        let mut args: Vec<&std::ffi::OsStr> = vec!["scan".as_ref(), "--keys-only".as_ref(), d];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        Ok(run(&args)?.1.lines().map(str::to_string).collect())
    };
    let reverse = scan(&["--from", "key100", "--to", "key105", "--reverse"])?;
    assert_eq!(reverse, ["key104", "key103", "key102", "key101", "key100"]);
    let first_three = scan(&["--from", "key100", "--max_keys", "3"])?;
    assert_eq!(first_three, ["key100", "key101", "key102"]);
    // `--limit` and `--max-keys` stay as aliases.
    assert_eq!(scan(&["--from", "key100", "--limit", "3"])?, first_three);
    assert_eq!(scan(&["--from", "key100", "--max-keys", "3"])?, first_three);
    let last_two = scan(&["--reverse", "--max_keys", "2"])?;
    assert_eq!(last_two, ["key199", "key198"]);
    // Reverse with only a lower bound ends at it; the whole database backwards is the forward
    // listing reversed.
    let mut forward = scan(&[])?;
    forward.reverse();
    assert_eq!(scan(&["--reverse"])?, forward);
    assert_eq!(scan(&["--reverse", "--from", "key198"])?, ["key199", "key198"]);
    Ok(())
}

#[test]
fn get_property_prints_values_and_exits_1_for_unknown_names() -> TestResult {
    let (_tmp, db) = temp_db()?;
    build_db(&db)?;
    let d = db.as_os_str();
    let (code, stdout, stderr) = run(&["get_property".as_ref(), d, "splitkv.estimate-num-keys".as_ref()])?;
    assert_eq!((code, stdout.as_str()), (Some(0), "205\n"), "{stderr}");
    let (code, stdout, _) = run(&["get_property".as_ref(), d, "splitkv.levelstats".as_ref()])?;
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("Level Files Size(MB)\n"), "{stdout}");
    // `key0` .. `key1` in hex covers key000..key099 and nothing of big*.
    let (code, stdout, _) = run(&["get_property".as_ref(), d, "splitkv.approximate-sizes:6b657930:6b657931".as_ref()])?;
    assert_eq!(code, Some(0));
    let total: u64 = stdout.split_whitespace().next().and_then(|w| w.parse().ok()).unwrap_or(0);
    assert!(total > 0, "{stdout}");
    let (code, _, stderr) = run(&["get_property".as_ref(), d, "splitkv.no-such-thing".as_ref()])?;
    assert_eq!(code, Some(1));
    assert!(stderr.contains("unknown property"), "{stderr}");
    let (code, stdout, _) = run(&["get_property".as_ref(), "--json".as_ref(), d, "splitkv.num-snapshots".as_ref()])?;
    assert_eq!(code, Some(0));
    let json: serde_json::Value = serde_json::from_str(&stdout)?;
    assert_eq!(json["value"], "0");
    Ok(())
}

#[test]
fn export_then_import_copies_every_pair() -> TestResult {
    let (tmp, db) = temp_db()?;
    build_db(&db)?;
    let d = db.as_os_str();
    let file = tmp.path().join("pairs.skv");
    let (code, stdout, stderr) = run(&["export".as_ref(), d, file.as_os_str()])?;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("exported 205 pairs"), "{stdout}");
    let copy = tmp.path().join("copy");
    let (code, stdout, stderr) = run(&["import".as_ref(), copy.as_os_str(), file.as_os_str()])?;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, format!("imported 205 pairs from {}\n", file.display()));
    let original = run(&["scan".as_ref(), "--hex".as_ref(), d])?.1;
    assert_eq!(run(&["scan".as_ref(), "--hex".as_ref(), copy.as_os_str()])?.1, original);
    assert_eq!(original.lines().count(), 205);
    // `load` is the same command, into a hash-index database this time.
    let hashed = tmp.path().join("hashed");
    let (code, _, stderr) =
        run(&["load".as_ref(), "--index".as_ref(), "hash".as_ref(), hashed.as_os_str(), file.as_os_str()])?;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(run(&["scan".as_ref(), "--hex".as_ref(), hashed.as_os_str()])?.1, original);
    Ok(())
}

#[test]
fn a_damaged_pairs_file_is_refused_and_nothing_is_written() -> TestResult {
    let (tmp, db) = temp_db()?;
    build_db(&db)?;
    let file = tmp.path().join("pairs.skv");
    assert_eq!(run(&["export".as_ref(), db.as_os_str(), file.as_os_str()])?.0, Some(0));
    let bytes = std::fs::read(&file)?;
    let target = tmp.path().join("target");
    assert_eq!(run(&["put".as_ref(), target.as_os_str(), "existing".as_ref(), "kept".as_ref()])?.0, Some(0));
    let damaged = tmp.path().join("damaged.skv");
    // A flipped byte late in the file (in the last records): the check finds it before the
    // first batch is written.
    let mut flipped = bytes.clone();
    let at = bytes.len() - 100;
    flipped[at] ^= 0x10;
    std::fs::write(&damaged, &flipped)?;
    let (code, _, stderr) = run(&["import".as_ref(), target.as_os_str(), damaged.as_os_str()])?;
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("corruption") && stderr.contains("damaged.skv"), "{stderr}");
    // A file cut short.
    std::fs::write(&damaged, &bytes[..bytes.len() / 2])?;
    let (code, _, stderr) = run(&["import".as_ref(), target.as_os_str(), damaged.as_os_str()])?;
    assert_eq!(code, Some(3), "{stderr}");
    // Not a pairs file at all.
    std::fs::write(&damaged, b"key\tvalue\nanother\tvalue\n")?;
    let (code, _, stderr) = run(&["import".as_ref(), target.as_os_str(), damaged.as_os_str()])?;
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("not a splitkv pairs file"), "{stderr}");
    assert_eq!(run(&["scan".as_ref(), target.as_os_str()])?.1, "existing\tkept\n");
    Ok(())
}
