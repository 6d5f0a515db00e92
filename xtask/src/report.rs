//! Benchmark reports: the rows of a bench binary (`DEVSTREAM_BENCH_JSON` lines) and, for CUDA,
//! the PyTorch/CuPy rows of `shared/anchors/peers_cuda.py`, turned into a markdown table and a
//! self-contained SVG bar chart.
//!
//! ```text
//! cargo xtask bench-report --json ROWS.jsonl[,MORE.jsonl] [--peers PEERS.txt] [--out PREFIX] [--title TEXT]
//! ```
//!
//! writes `PREFIX.md` and `PREFIX.svg` (default prefix `docs/results/bench-<backends>-<date>`).
//! The GPU machine has no Rust toolchain: run the bench binary there with
//! `DEVSTREAM_BENCH_JSON=$OUT/rows.jsonl` and `python3 peers_cuda.py > $OUT/peers.txt` in the same
//! session, then build the report here from the two files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One row of a bench binary: devstream against the raw/baseline call.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRow {
    pub backend: String,
    pub op: String,
    pub devstream_ns: f64,
    pub baseline_ns: f64,
    pub ratio: f64,
    pub target: f64,
    pub baseline: String,
}

/// One line of `peers_cuda.py`: a framework's Python-level cost of an op.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerRow {
    /// `torch` or `cupy`.
    pub framework: String,
    /// The label after the framework name, e.g. `s.record_event(e)`.
    pub label: String,
    /// Nanoseconds per op (or per kernel for the launch rows).
    pub ns: f64,
}

/// The ops that devstream rows and peer rows are matched on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CommonOp {
    StreamCreate,
    RecordEvent,
    WaitEvent,
    WaitStream,
    StreamQuery,
    EventQuery,
    Synchronize,
    KernelLaunch,
    GraphKernel,
}

impl CommonOp {
    const ALL: [CommonOp; 9] = [
        CommonOp::StreamCreate,
        CommonOp::RecordEvent,
        CommonOp::WaitEvent,
        CommonOp::WaitStream,
        CommonOp::StreamQuery,
        CommonOp::EventQuery,
        CommonOp::Synchronize,
        CommonOp::KernelLaunch,
        CommonOp::GraphKernel,
    ];

    fn name(self) -> &'static str {
        match self {
            CommonOp::StreamCreate => "stream create",
            CommonOp::RecordEvent => "record event",
            CommonOp::WaitEvent => "wait_event",
            CommonOp::WaitStream => "wait_stream",
            CommonOp::StreamQuery => "stream query (idle)",
            CommonOp::EventQuery => "event query (done)",
            CommonOp::Synchronize => "synchronize (idle)",
            CommonOp::KernelLaunch => "tiny kernel launch",
            CommonOp::GraphKernel => "kernel in a graph replay",
        }
    }

    /// The common op a devstream bench row measures, by its name (`None`: no peer measures it).
    fn of_bench(op: &str) -> Option<CommonOp> {
        let op = op.to_ascii_lowercase();
        let has = |word: &str| op.contains(word);
        Some(if has("graph") {
            CommonOp::GraphKernel
        } else if has("kernel") || has("launch_kernel") {
            CommonOp::KernelLaunch
        } else if has("wait_stream") {
            CommonOp::WaitStream
        } else if has("wait_event") {
            CommonOp::WaitEvent
        } else if has("record") && !has("new") {
            CommonOp::RecordEvent
        } else if has("query") && has("event") {
            CommonOp::EventQuery
        } else if has("query") {
            CommonOp::StreamQuery
        } else if has("synchronize") && !has("host") {
            CommonOp::Synchronize
        } else if (has("stream") && (has("create") || has("new"))) || has("stream::new") {
            CommonOp::StreamCreate
        } else {
            return None;
        })
    }

    /// The common op a peer line measures, by its label.
    fn of_peer(label: &str) -> Option<CommonOp> {
        let label = label.to_ascii_lowercase();
        let has = |word: &str| label.contains(word);
        Some(if has("graph") {
            CommonOp::GraphKernel
        } else if has("launches") {
            CommonOp::KernelLaunch
        } else if has("create") {
            CommonOp::StreamCreate
        } else if has("record") {
            CommonOp::RecordEvent
        } else if has("wait_event") {
            CommonOp::WaitEvent
        } else if has("wait_stream") {
            CommonOp::WaitStream
        } else if has("e.query") {
            CommonOp::EventQuery
        } else if has("s.query") || has("s.done") {
            CommonOp::StreamQuery
        } else if has("synchronize") {
            CommonOp::Synchronize
        } else {
            return None;
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing

/// A value of a flat JSON object.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Text(String),
    Number(f64),
    Other,
}

/// Parses one flat JSON object (string, number, bool and null values) into key/value pairs.
fn parse_flat_object(line: &str) -> Result<Vec<(String, Value)>, String> {
    let mut chars = line.trim().chars().peekable();
    let mut fields = Vec::new();
    let skip_ws = |chars: &mut std::iter::Peekable<std::str::Chars>| {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
    };
    let string = |chars: &mut std::iter::Peekable<std::str::Chars>| -> Result<String, String> {
        if chars.next() != Some('"') {
            return Err("expected a string".into());
        }
        let mut out = String::new();
        loop {
            match chars.next().ok_or("unterminated string")? {
                '"' => return Ok(out),
                '\\' => match chars.next().ok_or("unterminated escape")? {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'u' => {
                        let hex: String = chars.by_ref().take(4).collect();
                        let code = u32::from_str_radix(&hex, 16).map_err(|e| e.to_string())?;
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                    }
                    other => out.push(other),
                },
                c => out.push(c),
            }
        }
    };
    skip_ws(&mut chars);
    if chars.next() != Some('{') {
        return Err("expected '{'".into());
    }
    loop {
        skip_ws(&mut chars);
        if chars.peek() == Some(&'}') {
            chars.next();
            break;
        }
        let key = string(&mut chars)?;
        skip_ws(&mut chars);
        if chars.next() != Some(':') {
            return Err(format!("expected ':' after {key:?}"));
        }
        skip_ws(&mut chars);
        let value = if chars.peek() == Some(&'"') {
            Value::Text(string(&mut chars)?)
        } else {
            let mut token = String::new();
            while let Some(&c) = chars.peek() {
                if c == ',' || c == '}' || c.is_whitespace() {
                    break;
                }
                token.push(c);
                chars.next();
            }
            match token.as_str() {
                "true" | "false" | "null" => Value::Other,
                number => Value::Number(
                    number
                        .parse()
                        .map_err(|_| format!("bad value {number:?} for {key:?}"))?,
                ),
            }
        };
        fields.push((key, value));
        skip_ws(&mut chars);
        match chars.next() {
            Some(',') => continue,
            Some('}') => break,
            other => return Err(format!("expected ',' or '}}', found {other:?}")),
        }
    }
    skip_ws(&mut chars);
    if chars.next().is_some() {
        return Err("text after the object".into());
    }
    Ok(fields)
}

/// Parses the JSON lines a bench binary writes (blank lines are skipped).
pub fn parse_bench_rows(text: &str) -> Result<Vec<BenchRow>, String> {
    let mut rows = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields = parse_flat_object(line).map_err(|e| format!("line {}: {e}", number + 1))?;
        let text = |key: &str| -> Result<String, String> {
            match fields.iter().find(|(k, _)| k == key) {
                Some((_, Value::Text(t))) => Ok(t.clone()),
                _ => Err(format!("line {}: no text field {key:?}", number + 1)),
            }
        };
        let number_field = |key: &str| -> Result<f64, String> {
            match fields.iter().find(|(k, _)| k == key) {
                Some((_, Value::Number(n))) => Ok(*n),
                _ => Err(format!("line {}: no number field {key:?}", number + 1)),
            }
        };
        let devstream_ns = number_field("devstream_ns")?;
        let baseline_ns = number_field("baseline_ns")?;
        rows.push(BenchRow {
            backend: text("backend")?,
            op: text("op")?,
            devstream_ns,
            baseline_ns,
            ratio: number_field("ratio").unwrap_or(devstream_ns / baseline_ns),
            target: number_field("target")?,
            baseline: text("baseline").unwrap_or_default(),
        });
    }
    Ok(rows)
}

/// Parses the `LABEL   1234.5 ns/op` (or `ns/kernel`) lines of `peers_cuda.py`; other lines
/// (versions, priorities, checks) are skipped.
pub fn parse_peers(text: &str) -> Vec<PeerRow> {
    text.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let [framework, label @ .., value, unit] = words.as_slice() else {
                return None;
            };
            if !matches!(*framework, "torch" | "cupy")
                || !unit.starts_with("ns/")
                || label.is_empty()
            {
                return None;
            }
            Some(PeerRow {
                framework: framework.to_string(),
                label: label.join(" "),
                ns: value.parse().ok()?,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Comparison

/// One op measured by devstream and by at least one peer.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub op: CommonOp,
    /// The devstream row (its op name, devstream ns, raw ns).
    pub devstream: Option<(String, f64, f64)>,
    pub torch: Option<f64>,
    pub cupy: Option<f64>,
}

/// Matches the CUDA devstream rows with the peer rows, per common op.
pub fn compare(rows: &[BenchRow], peers: &[PeerRow]) -> Vec<Comparison> {
    let cuda: Vec<&BenchRow> = rows.iter().filter(|r| r.backend == "cuda").collect();
    CommonOp::ALL
        .into_iter()
        .filter_map(|op| {
            let peer = |framework: &str| {
                peers
                    .iter()
                    .find(|p| p.framework == framework && CommonOp::of_peer(&p.label) == Some(op))
                    .map(|p| p.ns)
            };
            let (torch, cupy) = (peer("torch"), peer("cupy"));
            if torch.is_none() && cupy.is_none() {
                return None;
            }
            let devstream = cuda
                .iter()
                .find(|r| CommonOp::of_bench(&r.op) == Some(op))
                .map(|r| (r.op.clone(), r.devstream_ns, r.baseline_ns));
            Some(Comparison {
                op,
                devstream,
                torch,
                cupy,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Markdown

fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "–".to_string(), |v| format!("{v:.decimals$}"))
}

/// The report as markdown: one table of devstream/raw ratios per backend, and the peer table.
pub fn markdown(title: &str, context: &str, rows: &[BenchRow], peers: &[PeerRow]) -> String {
    let mut out = format!("# {title}\n\n");
    if !context.is_empty() {
        let _ = writeln!(out, "{context}\n");
    }
    let mut backends: Vec<&str> = Vec::new();
    for row in rows {
        if !backends.contains(&row.backend.as_str()) {
            backends.push(&row.backend);
        }
    }
    for backend in backends {
        let baseline = rows
            .iter()
            .find(|r| r.backend == backend)
            .map_or("", |r| r.baseline.as_str());
        let _ = writeln!(out, "## {backend}: devstream against {baseline}\n");
        out.push_str("| op | devstream ns/op | baseline ns/op | ratio | target | |\n");
        out.push_str("|---|---:|---:|---:|---:|---|\n");
        for row in rows.iter().filter(|r| r.backend == backend) {
            let mark = if row.ratio <= row.target {
                "ok"
            } else {
                "**miss**"
            };
            let _ = writeln!(
                out,
                "| {} | {:.1} | {:.1} | {:.3} | {:.2} | {mark} |",
                row.op.replace('|', "\\|"),
                row.devstream_ns,
                row.baseline_ns,
                row.ratio,
                row.target
            );
        }
        out.push('\n');
    }
    let comparisons = compare(rows, peers);
    if !comparisons.is_empty() {
        out.push_str(
            "## CUDA: devstream (Rust) against PyTorch and CuPy (Python), same session\n\n",
        );
        out.push_str(
            "| op | devstream ns | raw driver ns | torch ns | cupy ns | torch / devstream | cupy / devstream |\n",
        );
        out.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
        for c in &comparisons {
            let devstream = c.devstream.as_ref().map(|d| d.1);
            let ratio = |peer: Option<f64>| match (peer, devstream) {
                (Some(p), Some(d)) if d > 0.0 => format!("{:.1}×", p / d),
                _ => "–".into(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                c.op.name(),
                cell(devstream, 1),
                cell(c.devstream.as_ref().map(|d| d.2), 1),
                cell(c.torch, 1),
                cell(c.cupy, 1),
                ratio(c.torch),
                ratio(c.cupy),
            );
        }
        out.push_str(
            "\nPeers are measured at the Python level (`peers_cuda.py`), devstream and the raw driver \
             from Rust; the columns show what a framework user pays per call.\n",
        );
    }
    out
}

// ---------------------------------------------------------------------------------------------
// SVG

const WIDTH: f64 = 960.0;
const LABEL: f64 = 300.0;
const RIGHT: f64 = 190.0;
const BAR: f64 = 16.0;
const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn format_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns >= 10.0 {
        format!("{ns:.0} ns")
    } else {
        format!("{ns:.1} ns")
    }
}

/// A power of ten of nanoseconds, for an axis: `100 ns`, `1 µs`, `10 ms`.
fn format_decade(ns: f64) -> String {
    let (value, unit) = if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        (ns, "ns")
    };
    format!("{value:.0} {unit}")
}

/// The ratio panel: one bar per row from the 1× line to devstream / baseline on a log₂ scale
/// (left: faster than the baseline, right: slower), a tick at each row's target.
fn ratio_panel(out: &mut String, rows: &[BenchRow], top: f64) -> f64 {
    let plot = WIDTH - LABEL - RIGHT;
    let finite = |v: f64| v.is_finite() && v > 0.0;
    let values: Vec<f64> = rows
        .iter()
        .flat_map(|r| [r.ratio, r.target])
        .filter(|v| finite(*v))
        .collect();
    let low = values
        .iter()
        .copied()
        .fold(1.0f64, f64::min)
        .log2()
        .floor()
        .min(-1.0);
    let high = values
        .iter()
        .copied()
        .fold(1.0f64, f64::max)
        .log2()
        .ceil()
        .max(1.0);
    let x = |ratio: f64| {
        let exp = if finite(ratio) { ratio.log2() } else { 0.0 };
        LABEL + (exp.clamp(low, high) - low) / (high - low) * plot
    };
    let _ = writeln!(
        out,
        "<text x=\"16\" y=\"{:.1}\" font-size=\"14\" font-weight=\"bold\" fill=\"#1d1d1d\">\
         devstream / baseline per op (log scale; left of 1× is faster; black tick: target)</text>",
        top + 16.0
    );
    let mut y = top + 44.0;
    let axis_top = y - 8.0;
    let mut backend = "";
    let mut body = String::new();
    for row in rows {
        if row.backend != backend {
            backend = &row.backend;
            let _ = writeln!(
                body,
                "<text x=\"16\" y=\"{:.1}\" font-weight=\"bold\" fill=\"#333333\">{} \
                 (baseline: {})</text>",
                y + 11.0,
                escape(backend),
                escape(&row.baseline)
            );
            y += 20.0;
        }
        let colour = if row.ratio <= row.target {
            "#59a14f"
        } else {
            "#e15759"
        };
        let (one, end) = (x(1.0), x(row.ratio));
        let _ = writeln!(
            body,
            "<g><title>{} {}: {:.1} ns vs {:.1} ns</title>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#333333\">{}</text>\
             <rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{BAR}\" rx=\"2\" \
             fill=\"{colour}\"/>\
             <line x1=\"{tx:.1}\" y1=\"{:.1}\" x2=\"{tx:.1}\" y2=\"{:.1}\" stroke=\"#1d1d1d\" \
             stroke-width=\"2\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#333333\">{:.2}× ({} vs {})</text></g>",
            escape(&row.backend),
            escape(&row.op),
            row.devstream_ns,
            row.baseline_ns,
            LABEL - 8.0,
            y + 12.0,
            escape(&row.op),
            one.min(end),
            (end - one).abs().max(1.5),
            y - 2.0,
            y + BAR + 2.0,
            one.max(end).max(x(row.target)) + 6.0,
            y + 12.0,
            row.ratio,
            format_ns(row.devstream_ns),
            format_ns(row.baseline_ns),
            tx = x(row.target),
        );
        y += BAR + 6.0;
    }
    // A tick at every power of two; 1× dashed.
    let mut exp = low;
    while exp <= high + 1e-9 {
        let ratio = 2f64.powf(exp);
        let label = if exp >= 0.0 {
            format!("{ratio:.0}×")
        } else {
            format!("1/{:.0}×", 1.0 / ratio)
        };
        let style = if exp == 0.0 {
            " stroke-dasharray=\"4 3\" stroke=\"#555555\""
        } else {
            " stroke=\"#e4e4e4\""
        };
        let _ = writeln!(
            out,
            "<line x1=\"{0:.1}\" y1=\"{axis_top:.1}\" x2=\"{0:.1}\" y2=\"{y:.1}\"{style}/>\
             <text x=\"{0:.1}\" y=\"{1:.1}\" text-anchor=\"middle\" fill=\"#555555\">{label}</text>",
            x(ratio),
            axis_top - 4.0,
        );
        exp += 1.0;
    }
    out.push_str(&body);
    y + 10.0
}

/// The peer panel: per common op, bars for devstream, the raw driver, torch and cupy on a log
/// scale.
fn peer_panel(out: &mut String, comparisons: &[Comparison], top: f64) -> f64 {
    const SERIES: [(&str, &str); 4] = [
        ("devstream (Rust)", "#4e79a7"),
        ("raw driver (Rust)", "#9d9d9d"),
        ("PyTorch (Python)", "#f28e2b"),
        ("CuPy (Python)", "#59a14f"),
    ];
    let plot = WIDTH - LABEL - RIGHT;
    let values: Vec<f64> = comparisons
        .iter()
        .flat_map(|c| {
            [
                c.devstream.as_ref().map(|d| d.1),
                c.devstream.as_ref().map(|d| d.2),
                c.torch,
                c.cupy,
            ]
        })
        .flatten()
        .filter(|v| *v > 0.0)
        .collect();
    let low = values
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .max(1.0);
    let high = values.iter().copied().fold(1.0f64, f64::max);
    let (low_exp, high_exp) = (
        low.log10().floor(),
        high.log10().ceil().max(low.log10().floor() + 1.0),
    );
    let x = |ns: f64| LABEL + (ns.max(1.0).log10() - low_exp) / (high_exp - low_exp) * plot;
    let _ = writeln!(
        out,
        "<text x=\"16\" y=\"{:.1}\" font-size=\"14\" font-weight=\"bold\" fill=\"#1d1d1d\">\
         CUDA, ns per op (log scale): devstream against PyTorch and CuPy</text>",
        top + 16.0
    );
    // Legend.
    let mut lx = 16.0;
    for (name, colour) in SERIES {
        let _ = writeln!(
            out,
            "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"12\" height=\"11\" fill=\"{colour}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#333333\">{name}</text>",
            top + 27.0,
            lx + 17.0,
            top + 37.0
        );
        lx += 40.0 + name.chars().count() as f64 * 6.4;
    }
    let mut y = top + 66.0;
    let axis_top = y - 6.0;
    let mut body = String::new();
    let bar = 11.0;
    for c in comparisons {
        let series = [
            c.devstream.as_ref().map(|d| d.1),
            c.devstream.as_ref().map(|d| d.2),
            c.torch,
            c.cupy,
        ];
        let count = series.iter().flatten().count() as f64;
        let group = count * (bar + 2.0);
        let _ = writeln!(
            body,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#333333\">{}</text>",
            LABEL - 8.0,
            y + group / 2.0 + 4.0,
            escape(c.op.name())
        );
        let mut by = y;
        for ((name, colour), value) in SERIES.iter().zip(series) {
            let Some(ns) = value else { continue };
            let _ = writeln!(
                body,
                "<g><title>{name}: {}</title><rect x=\"{LABEL}\" y=\"{by:.1}\" width=\"{:.1}\" \
                 height=\"{bar}\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" \
                 fill=\"#333333\">{}</text></g>",
                format_ns(ns),
                (x(ns) - LABEL).max(1.0),
                x(ns) + 5.0,
                by + 9.5,
                format_ns(ns)
            );
            by += bar + 2.0;
        }
        y += group + 12.0;
    }
    let mut exp = low_exp;
    while exp <= high_exp + 1e-9 {
        let ns = 10f64.powf(exp);
        let _ = writeln!(
            out,
            "<line x1=\"{0:.1}\" y1=\"{axis_top:.1}\" x2=\"{0:.1}\" y2=\"{y:.1}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{0:.1}\" y=\"{1:.1}\" text-anchor=\"middle\" fill=\"#555555\">{2}</text>",
            x(ns),
            axis_top - 4.0,
            format_decade(ns)
        );
        exp += 1.0;
    }
    out.push_str(&body);
    y + 6.0
}

/// The report as one SVG: the ratio panel and, when peer rows match, the peer panel.
pub fn svg(title: &str, rows: &[BenchRow], peers: &[PeerRow]) -> String {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<text x=\"16\" y=\"26\" font-size=\"16\" font-weight=\"bold\" fill=\"#1d1d1d\">{}</text>",
        escape(title)
    );
    let mut y = ratio_panel(&mut body, rows, 40.0);
    let comparisons = compare(rows, peers);
    if !comparisons.is_empty() {
        y = peer_panel(&mut body, &comparisons, y + 16.0);
    }
    let height = y + 12.0;
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {WIDTH} {height:.0}\" {FONT} font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n{body}</svg>\n"
    )
}

// ---------------------------------------------------------------------------------------------
// Command

fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
}

/// Writes `PREFIX.md` and `PREFIX.svg` for `rows` (and `peers`); returns the two paths.
pub fn write_report(
    prefix: &Path,
    title: &str,
    context: &str,
    rows: &[BenchRow],
    peers: &[PeerRow],
) -> Result<[PathBuf; 2], String> {
    if rows.is_empty() {
        return Err("no benchmark rows".into());
    }
    if let Some(dir) = prefix.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    }
    let md = prefix.with_extension("md");
    let svg_path = prefix.with_extension("svg");
    std::fs::write(&md, markdown(title, context, rows, peers))
        .map_err(|e| format!("write {}: {e}", md.display()))?;
    std::fs::write(&svg_path, svg(title, rows, peers))
        .map_err(|e| format!("write {}: {e}", svg_path.display()))?;
    Ok([md, svg_path])
}

/// `cargo xtask bench-report --json A.jsonl[,B.jsonl] [--peers P.txt] [--out PREFIX] [--title T]`
pub fn cli(args: &[String]) -> Result<(), String> {
    let json = super::flag_value(args, "--json").ok_or(
        "usage: cargo xtask bench-report --json ROWS.jsonl[,MORE.jsonl] [--peers PEERS.txt] \
         [--out PREFIX] [--title TEXT]",
    )?;
    let mut rows = Vec::new();
    for path in json.split(',').filter(|p| !p.is_empty()) {
        rows.extend(parse_bench_rows(&read(path)?).map_err(|e| format!("{path}: {e}"))?);
    }
    let peers = match super::flag_value(args, "--peers") {
        Some(path) => {
            let peers = parse_peers(&read(path)?);
            if peers.is_empty() {
                return Err(format!("{path}: no peer rows (LABEL  N ns/op lines)"));
            }
            peers
        }
        None => Vec::new(),
    };
    let mut backends: Vec<&str> = Vec::new();
    for row in &rows {
        if !backends.contains(&row.backend.as_str()) {
            backends.push(&row.backend);
        }
    }
    let date = super::today();
    let prefix = super::flag_value(args, "--out").map_or_else(
        || PathBuf::from("docs/results").join(format!("bench-{}-{date}", backends.join("-"))),
        PathBuf::from,
    );
    let title = super::flag_value(args, "--title").map_or_else(
        || format!("devstream benchmark: {}", backends.join(", ")),
        str::to_string,
    );
    let context = format!(
        "Date: {date}. Rows: {json}{}.",
        super::flag_value(args, "--peers")
            .map(|p| format!("; peers: {p}"))
            .unwrap_or_default()
    );
    let written = write_report(&prefix, &title, &context, &rows, &peers)?;
    for path in written {
        eprintln!("xtask: wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROWS: &str = concat!(
        "{\"backend\":\"cuda\",\"op\":\"record_event (existing event)\",\"devstream_ns\":170.00,\"baseline_ns\":159.80,\"ratio\":1.0638,\"target\":1.1,\"baseline\":\"cuEventRecord\"}\n",
        "{\"backend\":\"cuda\",\"op\":\"wait_event\",\"devstream_ns\":140.00,\"baseline_ns\":126.80,\"ratio\":1.1041,\"target\":1.1,\"baseline\":\"cuStreamWaitEvent\"}\n",
        "\n",
        "{\"backend\":\"cuda\",\"op\":\"query (idle)\",\"devstream_ns\":185.5,\"baseline_ns\":179.5,\"ratio\":1.0334,\"target\":1.1,\"baseline\":\"raw \\\"driver\\\"\"}\n",
    );

    const PEERS: &str = "torch 2.11.0 cupy 14.2.0\n\
        torch priority_range (0, -3)\n\
        torch Stream() create                         1661.6 ns/op\n\
        torch s.record_event(e)                       1474.3 ns/op\n\
        torch s2.wait_event(e)                        1497.2 ns/op\n\
        torch s.query()                                984.7 ns/op\n\
        torch e.query()                                712.3 ns/op\n\
        cupy s.record(e)                               691.6 ns/op\n\
        cupy s.done                                    553.6 ns/op\n\
        cupy 20000 tiny kernel launches               8367.9 ns/kernel\n\
        a = 42.0 (expected 42 )\n";

    #[test]
    fn bench_rows_parse_with_escapes_and_blank_lines() {
        let rows = parse_bench_rows(ROWS).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].op, "record_event (existing event)");
        assert_eq!(rows[1].devstream_ns, 140.0);
        assert_eq!(rows[2].baseline, "raw \"driver\"");
        assert!(parse_bench_rows("{\"backend\":\"cpu\"}").is_err());
        assert!(parse_bench_rows("not json").is_err());
    }

    #[test]
    fn peer_lines_parse_and_skip_the_rest() {
        let peers = parse_peers(PEERS);
        assert_eq!(peers.len(), 8);
        assert_eq!(
            peers[1],
            PeerRow {
                framework: "torch".into(),
                label: "s.record_event(e)".into(),
                ns: 1474.3
            }
        );
        assert_eq!(peers[7].label, "20000 tiny kernel launches");
    }

    #[test]
    fn ops_are_matched_across_devstream_and_peers() {
        let comparisons = compare(&parse_bench_rows(ROWS).unwrap(), &parse_peers(PEERS));
        let record = comparisons
            .iter()
            .find(|c| c.op == CommonOp::RecordEvent)
            .unwrap();
        assert_eq!(record.torch, Some(1474.3));
        assert_eq!(record.cupy, Some(691.6));
        assert_eq!(record.devstream.as_ref().unwrap().1, 170.0);
        let query = comparisons
            .iter()
            .find(|c| c.op == CommonOp::StreamQuery)
            .unwrap();
        assert_eq!((query.torch, query.cupy), (Some(984.7), Some(553.6)));
        let event_query = comparisons
            .iter()
            .find(|c| c.op == CommonOp::EventQuery)
            .unwrap();
        assert_eq!(event_query.torch, Some(712.3));
        assert!(event_query.devstream.is_none());
        assert!(comparisons.iter().all(|c| c.op != CommonOp::WaitStream));
    }

    #[test]
    fn bench_cuda_row_names_map_to_common_ops() {
        let cases = [
            ("record_event (cuEventRecord)", Some(CommonOp::RecordEvent)),
            ("wait_event (cuStreamWaitEvent)", Some(CommonOp::WaitEvent)),
            ("wait_stream (record + wait)", Some(CommonOp::WaitStream)),
            ("query idle (cuStreamQuery)", Some(CommonOp::StreamQuery)),
            (
                "synchronize idle (cuStreamSynchronize)",
                Some(CommonOp::Synchronize),
            ),
            ("host func round trip (launch + sync)", None),
            (
                "graph launch, per kernel of 1000 noops",
                Some(CommonOp::GraphKernel),
            ),
            ("stream create + destroy", Some(CommonOp::StreamCreate)),
            ("event create + destroy", None),
            ("record_event (new event)", None),
        ];
        for (name, op) in cases {
            assert_eq!(CommonOp::of_bench(name), op, "{name}");
        }
    }

    #[test]
    fn markdown_and_svg_hold_every_row() {
        let rows = parse_bench_rows(ROWS).unwrap();
        let peers = parse_peers(PEERS);
        let md = markdown("t", "", &rows, &peers);
        assert!(md.contains("| wait_event | 140.0 | 126.8 | 1.104 | 1.10 | **miss** |"));
        assert!(md.contains("| record event | 170.0 | 159.8 | 1474.3 | 691.6 | 8.7× | 4.1× |"));
        let svg = svg("t <cuda>", &rows, &peers);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("t &lt;cuda&gt;"));
        assert_eq!(svg.matches("<svg").count(), 1);
        assert_eq!(svg.matches("<g>").count(), svg.matches("</g>").count());
        for row in &rows {
            assert!(svg.contains(&format!("{:.2}×", row.ratio)));
        }
        assert!(svg.contains("PyTorch (Python)"));
        let without_peers = super::svg("t", &rows, &[]);
        assert!(!without_peers.contains("PyTorch"));
    }
}
