//! Sorted-set commands: ZADD (NX/XX/CH), ZREM, ZRANGE (by rank, REV, WITHSCORES),
//! ZRANGEBYSCORE (exclusive bounds, WITHSCORES, LIMIT), ZCARD, ZSCORE.
//!
//! A sorted set is a metadata record holding its cardinality, a `z` record per member (member
//! -> score) for ZSCORE and updates, and an `s` record per member whose key is the score in an
//! order-preserving encoding followed by the member, so a range by score or by rank is an
//! ordered scan. Both records of a member change in one batch.

use super::{parse_f64, parse_i64, syntax_error, Ctx};
use crate::keys::{self, Kind, Meta};
use crate::resp::{Protocol, Reply};
use crate::store::{wrong_type, CmdResult};
use bytes::Bytes;
use splitkv::{ReadOptions, WriteBatch};
use std::collections::HashMap;

fn read_zset(ctx: &mut Ctx, opts: &ReadOptions, key: &[u8]) -> Result<Option<Meta>, Reply> {
    match ctx.server.store.meta(opts, key, ctx.now, &mut ctx.expired)? {
        Some(m) if m.kind != Kind::ZSet => Err(wrong_type()),
        other => Ok(other),
    }
}

fn decode_score(raw: &[u8]) -> Result<f64, Reply> {
    let bytes: [u8; 8] = raw.try_into().map_err(|_| Reply::err("ERR unreadable sorted-set score"))?;
    Ok(f64::from_bits(u64::from_be_bytes(bytes)))
}

pub fn zadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut i = 2;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"CH" => ch = true,
            _ => break,
        }
        i += 1;
    }
    if nx && xx {
        return Err(Reply::err("ERR XX and NX options at the same time are not compatible"));
    }
    let pairs = &args[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(syntax_error());
    }
    // Parse every score before writing anything: a bad one fails the whole command.
    let scores: Vec<f64> = pairs.chunks(2).map(|p| parse_f64(&p[0])).collect::<Result<_, _>>()?;
    let store = &ctx.server.store;
    let mut batch = WriteBatch::new();
    let meta = store.typed_for_write(key, Kind::ZSet, ctx.now, &mut batch)?;
    let (mut card, expire_at) = meta.as_ref().map_or((0, 0), |m| (m.len, m.expire_at));
    // Scores set earlier in this command (a member given twice: the last one wins).
    let mut pending: HashMap<&[u8], f64> = HashMap::new();
    let (mut added, mut changed) = (0i64, 0i64);
    for (pair, &score) in pairs.chunks(2).zip(&scores) {
        let member = &pair[1];
        let member_key = keys::sub_key(keys::ZSET_MEMBER, key, member);
        let old = match pending.get(member.as_ref()) {
            Some(&s) => Some(s),
            None if meta.is_some() => store.db.get(&member_key)?.map(|raw| decode_score(&raw)).transpose()?,
            None => None,
        };
        match old {
            Some(_) if nx => continue,
            None if xx => continue,
            Some(old) if old == score => continue,
            Some(old) => {
                batch.delete(keys::score_key(key, old, member));
                changed += 1;
            }
            None => {
                added += 1;
                card += 1;
            }
        }
        batch.put(member_key, score.to_bits().to_be_bytes());
        batch.put(keys::score_key(key, score, member), b"");
        pending.insert(member, score);
    }
    if card > 0 {
        store.put_meta(&mut batch, key, &Meta::collection(Kind::ZSet, card, expire_at), expire_at);
    }
    store.commit(batch)?;
    Ok(Reply::Int(if ch { added + changed } else { added }))
}

pub fn zrem(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let store = &ctx.server.store;
    let mut batch = WriteBatch::new();
    let Some(meta) = store.typed_for_write(key, Kind::ZSet, ctx.now, &mut batch)? else {
        store.commit(batch)?;
        return Ok(Reply::Int(0));
    };
    let mut removed = 0u64;
    let mut seen = std::collections::HashSet::new();
    for member in &args[2..] {
        if !seen.insert(member) {
            continue;
        }
        let member_key = keys::sub_key(keys::ZSET_MEMBER, key, member);
        if let Some(raw) = store.db.get(&member_key)? {
            batch.delete(keys::score_key(key, decode_score(&raw)?, member));
            batch.delete(member_key);
            removed += 1;
        }
    }
    if removed == meta.len {
        store.delete_records(&mut batch, key, &meta)?;
    } else if removed > 0 {
        store.put_meta(
            &mut batch,
            key,
            &Meta::collection(Kind::ZSet, meta.len - removed, meta.expire_at),
            meta.expire_at,
        );
    }
    store.commit(batch)?;
    Ok(Reply::Int(removed as i64))
}

pub fn zcard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(read_zset(ctx, &ReadOptions::default(), &args[1])?.map_or(0, |m| m.len as i64)))
}

pub fn zscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = ReadOptions { snapshot: Some(ctx.server.store.db.snapshot()), ..ReadOptions::default() };
    if read_zset(ctx, &opts, &args[1])?.is_none() {
        return Ok(Reply::Nil);
    }
    match ctx.server.store.db.get_opt(&opts, keys::sub_key(keys::ZSET_MEMBER, &args[1], &args[2]))? {
        Some(raw) => Ok(Reply::Double(decode_score(&raw)?)),
        None => Ok(Reply::Nil),
    }
}

/// Formats (member, score) results: a flat list in RESP2, [member, score] pairs in RESP3.
fn scored_reply(items: Vec<(Bytes, f64)>, with_scores: bool, proto: Protocol) -> Reply {
    Reply::Array(if !with_scores {
        items.into_iter().map(|(m, _)| Reply::Bulk(m)).collect()
    } else if proto == Protocol::Resp3 {
        items.into_iter().map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)])).collect()
    } else {
        items.into_iter().flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)]).collect()
    })
}

/// Walks the set in score order from `from` (a score bound in sortable bytes), skipping
/// `skip` entries and keeping those `keep` accepts until it says stop.
fn walk_scores(
    ctx: &Ctx,
    opts: &ReadOptions,
    key: &[u8],
    from: Option<[u8; 8]>,
    mut keep: impl FnMut(f64, &Bytes) -> Walk,
) -> Result<Vec<(Bytes, f64)>, Reply> {
    let prefix = keys::sub_prefix(keys::ZSET_SCORE, key);
    let end = keys::prefix_end(&prefix);
    let mut start = prefix.clone();
    if let Some(from) = from {
        start.extend_from_slice(&from);
    }
    let mut out = Vec::new();
    let iter_opts = ReadOptions { keys_only: true, ..opts.clone() };
    for item in ctx.server.store.db.range_opt(iter_opts, start..end)? {
        let (raw, _) = item?;
        let (score, _) =
            keys::split_score_key(&raw, prefix.len()).ok_or_else(|| Reply::err("ERR unreadable sorted-set record"))?;
        let member = raw.slice(prefix.len() + 8..);
        match keep(score, &member) {
            Walk::Take => out.push((member, score)),
            Walk::Skip => {}
            Walk::Stop => break,
        }
    }
    Ok(out)
}

enum Walk {
    Take,
    Skip,
    Stop,
}

pub fn zrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mut rev, mut with_scores) = (false, false);
    for opt in &args[4..] {
        match opt.to_ascii_uppercase().as_slice() {
            b"REV" => rev = true,
            b"WITHSCORES" => with_scores = true,
            // BYSCORE/BYLEX/LIMIT forms: ZRANGEBYSCORE covers the score case.
            _ => return Err(syntax_error()),
        }
    }
    let (start, stop) = (parse_i64(&args[2])?, parse_i64(&args[3])?);
    let opts = ReadOptions { snapshot: Some(ctx.server.store.db.snapshot()), ..ReadOptions::default() };
    let Some(meta) = read_zset(ctx, &opts, &args[1])? else { return Ok(Reply::Array(Vec::new())) };
    let card = meta.len as i64;
    let start = if start < 0 { (card + start).max(0) } else { start };
    let stop = if stop < 0 { card + stop } else { stop.min(card - 1) };
    if start > stop || start >= card {
        return Ok(Reply::Array(Vec::new()));
    }
    // A reversed rank range is the mirrored forward range, read forward and turned around.
    let (lo, hi) = if rev { (card - 1 - stop, card - 1 - start) } else { (start, stop) };
    let mut rank = -1i64;
    let mut items = walk_scores(ctx, &opts, &args[1], None, |_, _| {
        rank += 1;
        if rank > hi {
            Walk::Stop
        } else if rank >= lo {
            Walk::Take
        } else {
            Walk::Skip
        }
    })?;
    if rev {
        items.reverse();
    }
    Ok(scored_reply(items, with_scores, ctx.conn.proto))
}

/// A ZRANGEBYSCORE bound: `1.5`, `(1.5` (exclusive), `-inf`, `+inf`.
fn parse_bound(arg: &[u8]) -> Result<(f64, bool), Reply> {
    let bad = || Reply::err("ERR min or max is not a float");
    match arg.strip_prefix(b"(") {
        Some(rest) => Ok((parse_f64(rest).map_err(|_| bad())?, true)),
        None => Ok((parse_f64(arg).map_err(|_| bad())?, false)),
    }
}

pub fn zrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (min, min_excl) = parse_bound(&args[2])?;
    let (max, max_excl) = parse_bound(&args[3])?;
    let (mut with_scores, mut offset, mut count) = (false, 0i64, -1i64);
    let mut i = 4;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"WITHSCORES" => with_scores = true,
            b"LIMIT" if i + 2 < args.len() => {
                offset = parse_i64(&args[i + 1])?;
                count = parse_i64(&args[i + 2])?;
                i += 2;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    let opts = ReadOptions { snapshot: Some(ctx.server.store.db.snapshot()), ..ReadOptions::default() };
    if read_zset(ctx, &opts, &args[1])?.is_none() || offset < 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    let mut skipped = 0;
    let mut taken = 0;
    let items = walk_scores(ctx, &opts, &args[1], Some(keys::score_to_sortable(min)), |score, _| {
        if score > max || (max_excl && score >= max) || (count >= 0 && taken >= count) {
            return Walk::Stop;
        }
        if min_excl && score <= min {
            return Walk::Skip;
        }
        if skipped < offset {
            skipped += 1;
            return Walk::Skip;
        }
        taken += 1;
        Walk::Take
    })?;
    Ok(scored_reply(items, with_scores, ctx.conn.proto))
}
