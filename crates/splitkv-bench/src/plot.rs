//! `--plot=DIR`: SVG charts of one benchmark, written after it finishes.
//!
//! - `<benchmark>-<n>-throughput.svg`: operations per second in each 100 ms interval, which shows
//!   write stalls and compaction interference that an average hides;
//! - `<benchmark>-<n>-latency-cdf.svg`: latency by percentile up to p99.99 on a "nines" axis
//!   (each decade of tail gets equal width) with latency on a log scale;
//! - `<benchmark>-<n>-levels.svg`: SSTables per LSM level over time (splitkv only: it is the
//!   engine whose levels the harness can sample).
//!
//! `<n>` is the benchmark's 1-based position in `--benchmarks`, so repeated benchmarks
//! (`readrandom,...,readrandom`) do not overwrite each other. Rendering uses `plotters` with only
//! its SVG backend, so the feature adds no system libraries or fonts; builds without the `plot`
//! feature keep the flag and refuse it up front ([`ensure_available`]) rather than run a long
//! benchmark and then fail. Charts are drawn by the runner thread after the benchmark's threads
//! have joined, so nothing here is shared.

use crate::flags::Flags;
use crate::stats_dump::LevelSample;

/// What the charts of one benchmark are drawn from.
#[cfg_attr(not(feature = "plot"), allow(dead_code))]
pub struct BenchmarkSeries<'a> {
    /// Benchmark name.
    pub name: &'a str,
    /// 1-based position in `--benchmarks`.
    pub ordinal: usize,
    /// `(seconds since start, ops/s)` per interval.
    pub throughput: &'a [(f64, f64)],
    /// `(percentile, microseconds)`, percentiles ascending.
    pub latency_cdf: &'a [(f64, f64)],
    /// Level file counts over time; empty when the engine was not sampled.
    pub levels: &'a [LevelSample],
}

/// The message for `--plot` in a build without the `plot` feature.
pub const MISSING_FEATURE: &str = "--plot: built without the plot feature; rebuild with --features plot";

/// Fails when `--plot` was given to a build that cannot draw.
pub fn ensure_available(flags: &Flags) -> Result<(), &'static str> {
    if flags.plot.is_some() && !cfg!(feature = "plot") {
        return Err(MISSING_FEATURE);
    }
    Ok(())
}

#[cfg(feature = "plot")]
pub use svg::render;

#[cfg(feature = "plot")]
mod svg {
    use std::path::{Path, PathBuf};

    use plotters::prelude::*;

    use super::{BenchmarkSeries, LevelSample};
    use crate::engines::BenchResult;

    const SIZE: (u32, u32) = (900, 500);
    /// The deepest tail the latency chart shows: p99.99 is four nines.
    const MAX_NINES: f64 = 4.0;

    /// Writes the benchmark's charts into `dir` (created if missing) and returns their paths. A
    /// series with nothing to show gets no chart rather than an empty frame: `compact` and `gc`
    /// finish no operations, so they have no throughput or latency, only levels.
    pub fn render(dir: &Path, series: &BenchmarkSeries<'_>) -> BenchResult<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let stem = format!("{}-{}", series.name, series.ordinal);
        let mut written = Vec::new();
        if series.throughput.iter().any(|&(_, ops_per_sec)| ops_per_sec > 0.0) {
            let path = dir.join(format!("{stem}-throughput.svg"));
            throughput_chart(&path, series)?;
            written.push(path);
        }
        if !series.latency_cdf.is_empty() {
            let path = dir.join(format!("{stem}-latency-cdf.svg"));
            latency_chart(&path, series)?;
            written.push(path);
        }
        if !series.levels.is_empty() {
            let path = dir.join(format!("{stem}-levels.svg"));
            levels_chart(&path, series)?;
            written.push(path);
        }
        Ok(written)
    }

    /// plotters' errors borrow the backend's error type; the runner only reports them as text.
    fn text_error<E: std::fmt::Display>(err: E) -> crate::engines::BenchError {
        err.to_string().into()
    }

    /// An axis range that is never empty, so a constant series still gets a visible line.
    fn upper_bound(max: f64) -> f64 {
        if max > 0.0 && max.is_finite() {
            max * 1.05
        } else {
            1.0
        }
    }

    fn throughput_chart(path: &Path, series: &BenchmarkSeries<'_>) -> BenchResult<()> {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(text_error)?;
        let x_max = series.throughput.iter().map(|p| p.0).fold(0.0, f64::max);
        let y_max = series.throughput.iter().map(|p| p.1).fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{}: throughput per 100 ms", series.name), ("sans-serif", 20))
            .margin(12)
            // Room for the last x tick label (`p99.99`), which is centred on the right edge.
            .margin_right(40)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..upper_bound(x_max), 0.0..upper_bound(y_max))
            .map_err(text_error)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("ops/s")
            .y_label_formatter(&|ops| format!("{ops:.0}"))
            .draw()
            .map_err(text_error)?;
        chart.draw_series(LineSeries::new(series.throughput.iter().copied(), &BLUE)).map_err(text_error)?;
        root.present().map_err(text_error)?;
        Ok(())
    }

    /// Distance of a percentile from the median in "nines": 90 -> 1, 99 -> 2, 99.9 -> 3.
    fn nines(percentile: f64) -> f64 {
        let remaining = (1.0 - percentile / 100.0).max(10f64.powf(-MAX_NINES));
        -remaining.log10()
    }

    fn percentile_label(nines: &f64) -> String {
        let percentile = 100.0 * (1.0 - 10f64.powf(-nines));
        // As many decimals as the tick has nines past 99, so 99.9 does not print as 100.
        let decimals = (nines.round() as usize).saturating_sub(2);
        format!("p{percentile:.decimals$}")
    }

    fn latency_chart(path: &Path, series: &BenchmarkSeries<'_>) -> BenchResult<()> {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(text_error)?;
        // A log axis needs a positive floor; sub-nanosecond latencies do not occur in practice.
        let floor = 0.001;
        let points: Vec<(f64, f64)> =
            series.latency_cdf.iter().map(|&(p, micros)| (nines(p), micros.max(floor))).collect();
        let y_min = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let y_max = points.iter().map(|p| p.1).fold(floor, f64::max);
        let y_range = (y_min * 0.8)..(y_max * 1.25).max(y_min * 2.0);
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{}: latency by percentile", series.name), ("sans-serif", 20))
            .margin(12)
            // Room for the last x tick label (`p99.99`), which is centred on the right edge.
            .margin_right(40)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..MAX_NINES, y_range.log_scale())
            .map_err(text_error)?;
        chart
            .configure_mesh()
            .x_labels(MAX_NINES as usize + 1)
            .x_label_formatter(&percentile_label)
            .x_desc("percentile")
            .y_desc("latency (us, log scale)")
            .y_label_formatter(&|micros| if *micros >= 1.0 { format!("{micros:.0}") } else { format!("{micros:.3}") })
            .draw()
            .map_err(text_error)?;
        chart.draw_series(LineSeries::new(points, &RED)).map_err(text_error)?;
        root.present().map_err(text_error)?;
        Ok(())
    }

    fn levels_chart(path: &Path, series: &BenchmarkSeries<'_>) -> BenchResult<()> {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(text_error)?;
        let first_ms = series.levels.first().map_or(0, |s| s.t_ms);
        let seconds = |sample: &LevelSample| sample.t_ms.saturating_sub(first_ms) as f64 / 1000.0;
        let x_max = series.levels.last().map_or(0.0, seconds);
        let level_count = series.levels.iter().map(|s| s.files.len()).max().unwrap_or(0);
        let y_max = series.levels.iter().flat_map(|s| s.files.iter().copied()).max().unwrap_or(0);
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{}: SSTables per level", series.name), ("sans-serif", 20))
            .margin(12)
            // Room for the last x tick label (`p99.99`), which is centred on the right edge.
            .margin_right(40)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..upper_bound(x_max), 0.0..upper_bound(y_max as f64))
            .map_err(text_error)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("files")
            .y_label_formatter(&|files| format!("{files:.0}"))
            .draw()
            .map_err(text_error)?;
        for level in 0..level_count {
            // Levels that never held a file would only stack flat lines on the axis.
            if series.levels.iter().all(|s| s.files.get(level).copied().unwrap_or(0) == 0) {
                continue;
            }
            let color = Palette99::pick(level).to_rgba();
            let points = series.levels.iter().map(|s| (seconds(s), s.files.get(level).copied().unwrap_or(0) as f64));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(text_error)?
                .label(format!("L{level}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 14))
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(text_error)?;
        root.present().map_err(text_error)?;
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn svg_has_a_line(path: &Path) -> bool {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            text.contains("<svg") && (text.contains("<polyline") || text.contains("<path"))
        }

        #[test]
        fn renders_every_chart_from_synthetic_series() {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("charts");
            let throughput: Vec<(f64, f64)> =
                (1..=30).map(|i| (f64::from(i) * 0.1, 1000.0 + f64::from(i % 7) * 50.0)).collect();
            let latency_cdf: Vec<(f64, f64)> = [0.0, 50.0, 90.0, 99.0, 99.9, 99.99]
                .iter()
                .zip([1.0, 2.0, 5.0, 40.0, 900.0, 20_000.0])
                .map(|(p, l)| (*p, l))
                .collect();
            let levels: Vec<LevelSample> = (0..20)
                .map(|i| LevelSample { t_ms: 1000 + i * 100, files: vec![(i % 4) as usize, i as usize / 3, 0] })
                .collect();
            let series = BenchmarkSeries {
                name: "fillrandom",
                ordinal: 3,
                throughput: &throughput,
                latency_cdf: &latency_cdf,
                levels: &levels,
            };
            let written = render(&out, &series).unwrap();
            let names: Vec<String> =
                written.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).collect();
            assert_eq!(
                names,
                ["fillrandom-3-throughput.svg", "fillrandom-3-latency-cdf.svg", "fillrandom-3-levels.svg"]
            );
            for path in &written {
                assert!(svg_has_a_line(path), "{}", path.display());
            }
            let levels_svg = std::fs::read_to_string(&written[2]).unwrap();
            // Levels 0 and 1 held files and get legend entries; level 2 stayed empty and is left out.
            let has_text = |label: &str| levels_svg.lines().any(|line| line.trim() == label);
            assert!(has_text("L0") && has_text("L1") && !has_text("L2"));
        }

        #[test]
        fn empty_series_get_no_chart() {
            let dir = tempfile::tempdir().unwrap();
            let idle = [(0.1, 0.0), (0.2, 0.0)];
            let series =
                BenchmarkSeries { name: "compact", ordinal: 1, throughput: &idle, latency_cdf: &[], levels: &[] };
            assert_eq!(render(dir.path(), &series).unwrap(), Vec::<std::path::PathBuf>::new());
            let throughput = [(0.1, 5.0)];
            let series =
                BenchmarkSeries { name: "compact", ordinal: 1, throughput: &throughput, latency_cdf: &[], levels: &[] };
            let written = render(dir.path(), &series).unwrap();
            assert_eq!(written, [dir.path().join("compact-1-throughput.svg")]);
            assert!(svg_has_a_line(&written[0]));
        }

        #[test]
        fn percentile_ticks_read_as_nines() {
            assert_eq!(percentile_label(&0.0), "p0");
            assert_eq!(percentile_label(&2.0), "p99");
            assert_eq!(percentile_label(&4.0), "p99.99");
            assert!((nines(99.9) - 3.0).abs() < 1e-9);
            assert_eq!(nines(100.0), MAX_NINES);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_flag_needs_the_feature() {
        let flags = crate::flags::parse(["--plot=charts"]).unwrap();
        if cfg!(feature = "plot") {
            assert_eq!(ensure_available(&flags), Ok(()));
        } else {
            assert_eq!(ensure_available(&flags), Err(MISSING_FEATURE));
            assert!(MISSING_FEATURE.contains("rebuild with --features plot"));
        }
        assert_eq!(ensure_available(&Flags::default()), Ok(()));
    }
}
