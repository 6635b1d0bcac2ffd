//! Greedy error-bounded piecewise linear regression (the "shrinking cone" of FITing-tree and
//! Bourbon), trained in one pass over sorted points, and the prediction it is measured with.
//!
//! A segment starts at a point `(x0, y0)` and keeps the range of slopes that predict every point
//! added since within `±target_error`; a point whose own slope range misses the kept range starts
//! the next segment. The stored slope is the middle of the final range.
//!
//! [`predict`] is the *only* arithmetic used for lookups, and the error stored with each segment
//! is measured by calling it on every training point, so floating-point rounding can never make
//! the stored bound wrong. Predictions are monotone in `x` across the whole model: within a
//! segment the slope is non-negative, and each segment's predictions are capped at the next
//! segment's first position (the cap also never increases a training point's error, since that
//! point's position lies below the next segment's start).

/// One linear piece: from `x` on, position `y + slope * (key - x)`, at most `err` off.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    /// First key number of the segment.
    pub x: u64,
    /// Position of the segment's first key.
    pub y: u64,
    /// Positions per key number (finite, `>= 0`).
    pub slope: f64,
    /// Largest distance between a prediction and the true position of a training point.
    pub err: u64,
}

/// The predicted position of key number `q` in segment `seg`, capped at `cap` (the next
/// segment's first position, or the end of the sub-range).
pub fn predict(seg: &Segment, q: u64, cap: u64) -> u64 {
    if q <= seg.x {
        return seg.y.min(cap);
    }
    let p = seg.y as f64 + seg.slope * (q - seg.x) as f64;
    if p >= cap as f64 {
        cap
    } else {
        p as u64
    }
}

/// Fits segments to `points` (`x` and `y` strictly increasing), the last of which is followed
/// by position `end`, and measures each segment's error.
pub fn fit(points: &[(u64, u64)], end: u64, target_error: u64) -> Vec<Segment> {
    let mut segments: Vec<(usize, Segment)> = Vec::new();
    let e = target_error as f64;
    let mut start = 0;
    let (mut lo, mut hi) = (0.0f64, f64::INFINITY);
    for (i, &(x, y)) in points.iter().enumerate() {
        // `start` is an earlier point's index.
        let Some(&(x0, y0)) = points.get(start).filter(|_| i != start) else { continue };
        let dx = (x - x0) as f64;
        let dy = y as f64 - y0 as f64;
        let (p_lo, p_hi) = (((dy - e) / dx).max(0.0), (dy + e) / dx);
        if p_lo.max(lo) <= p_hi.min(hi) {
            lo = lo.max(p_lo);
            hi = hi.min(p_hi);
        } else {
            segments.push((start, Segment { x: x0, y: y0, slope: slope_between(lo, hi), err: 0 }));
            start = i;
            (lo, hi) = (0.0, f64::INFINITY);
        }
    }
    if let Some(&(x0, y0)) = points.get(start) {
        segments.push((start, Segment { x: x0, y: y0, slope: slope_between(lo, hi), err: 0 }));
    }
    // Measure each segment with the lookup arithmetic.
    let mut out: Vec<Segment> = segments.iter().map(|&(_, s)| s).collect();
    for (k, &(first, _)) in segments.iter().enumerate() {
        let last = segments.get(k + 1).map_or(points.len(), |&(next, _)| next);
        let cap = out.get(k + 1).map_or(end, |s| s.y);
        let covered = points.get(first..last).unwrap_or_default();
        if let Some(seg) = out.get_mut(k) {
            let fitted = *seg;
            seg.err = covered.iter().map(|&(x, y)| predict(&fitted, x, cap).abs_diff(y)).max().unwrap_or(0);
        }
    }
    out
}

fn slope_between(lo: f64, hi: f64) -> f64 {
    if hi.is_finite() {
        (lo + hi) / 2.0
    } else {
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(points: &[(u64, u64)], end: u64, target: u64) -> Vec<Segment> {
        let segs = fit(points, end, target);
        assert_eq!(segs[0].x, points[0].0);
        for (i, &(x, y)) in points.iter().enumerate() {
            let s = segs.partition_point(|s| s.x <= x) - 1;
            let cap = segs.get(s + 1).map_or(end, |n| n.y);
            let p = predict(&segs[s], x, cap);
            assert!(p.abs_diff(y) <= segs[s].err, "point {i} off by more than its segment's bound");
        }
        segs
    }

    #[test]
    fn a_line_is_one_segment_with_no_error() {
        let points: Vec<(u64, u64)> = (0..1000).map(|i| (i * 10 + 5, i)).collect();
        let segs = check(&points, 1000, 4);
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].err, 0);
    }

    #[test]
    fn bends_and_gaps_start_segments_and_stay_within_target() {
        let mut points = Vec::new();
        let mut x = 0u64;
        for i in 0..3000u64 {
            x += if i % 1000 < 500 { 1 } else { 1 << 40 } + (i * 7919) % 13;
            points.push((x, i * 2));
        }
        let segs = check(&points, 6000, 8);
        assert!(segs.len() > 1 && segs.len() < 100, "{} segments", segs.len());
        // The cone keeps every point within the target; only rounding could add to it.
        assert!(segs.iter().all(|s| s.err <= 9), "{segs:?}");
    }

    #[test]
    fn predictions_are_monotone_across_segments() {
        let points: Vec<(u64, u64)> = (0..500u64).map(|i| (i * i * 1000 + (i % 7) * 100, i * 5 + (i % 5))).collect();
        let segs = check(&points, 2500, 2);
        let mut last = 0;
        for q in (0..points.last().unwrap().0 + 10).step_by(997) {
            let s = segs.partition_point(|s| s.x <= q).saturating_sub(1);
            let p = predict(&segs[s], q, segs.get(s + 1).map_or(2500, |n| n.y));
            assert!(p >= last, "prediction went down at {q}");
            last = p;
        }
    }
}
