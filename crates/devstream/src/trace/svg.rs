//! A self-contained SVG timeline: one lane per stream, ops as labelled boxes on a time axis,
//! flows as arrows, under the lanes a step chart per watched pool (its reserved and used bytes,
//! each sample held until the next), a legend. No scripts, no external fonts or styles.

use super::{FlowKind, PoolSample, PoolTrack, Span, Trace, TracedOp};
use std::fmt::Write;
use std::time::Duration;

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 190.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 64.0;
const LANE_GAP: f64 = 6.0;
const HOST_STRIP: f64 = 9.0;
const DEVICE_STRIP: f64 = 26.0;
/// A pool's track: its height, and the margin above and below its chart inside it.
const POOL_TRACK: f64 = 44.0;
const POOL_MARGIN: f64 = 6.0;
/// The colours of a pool's reserved and used bytes.
const RESERVED_COLOUR: &str = "#4e79a7";
const USED_COLOUR: &str = "#e15759";
const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

/// The colour class of an op, and its legend text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Category {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    Fill,
    HostFunc,
    Graph,
    Record,
    Wait,
    FlagWrite,
    HostOnly,
}

impl Category {
    const ALL: [Category; 10] = [
        Category::HostToDevice,
        Category::HostFunc,
        Category::Fill,
        Category::DeviceToHost,
        Category::DeviceToDevice,
        Category::Graph,
        Category::Record,
        Category::Wait,
        Category::FlagWrite,
        Category::HostOnly,
    ];

    fn of(op: &str) -> Category {
        match op {
            "copy_host_to_device" | "copy_from_host" => Category::HostToDevice,
            "copy_device_to_host" => Category::DeviceToHost,
            "copy_device_to_device" => Category::DeviceToDevice,
            "fill" => Category::Fill,
            "launch_host_func" => Category::HostFunc,
            "graph_launch" => Category::Graph,
            "record" | "record_event" => Category::Record,
            "wait_event" | "wait_stream" | "wait_flag" => Category::Wait,
            "write_flag" => Category::FlagWrite,
            _ => Category::HostOnly,
        }
    }

    /// (fill, text colour)
    fn colours(self) -> (&'static str, &'static str) {
        match self {
            Category::HostToDevice => ("#4e79a7", "#ffffff"),
            Category::DeviceToHost => ("#9467bd", "#ffffff"),
            Category::DeviceToDevice => ("#76b7b2", "#1d1d1d"),
            Category::Fill => ("#59a14f", "#ffffff"),
            Category::HostFunc => ("#f28e2b", "#1d1d1d"),
            Category::Graph => ("#edc948", "#1d1d1d"),
            Category::Record => ("#e15759", "#ffffff"),
            Category::Wait => ("#9d9d9d", "#1d1d1d"),
            Category::FlagWrite => ("#ff9da7", "#1d1d1d"),
            Category::HostOnly => ("#d9d9d9", "#1d1d1d"),
        }
    }

    fn legend(self) -> &'static str {
        match self {
            Category::HostToDevice => "copy host→device",
            Category::DeviceToHost => "copy device→host",
            Category::DeviceToDevice => "copy device→device",
            Category::Fill => "fill",
            Category::HostFunc => "host function",
            Category::Graph => "graph launch",
            Category::Record => "record event",
            Category::Wait => "wait (event, stream, flag)",
            Category::FlagWrite => "write flag",
            Category::HostOnly => "host only (query, synchronize, alloc, capture)",
        }
    }
}

/// XML-escapes text for element content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// A time unit that reads well for a timeline `total` long: (name, nanoseconds per unit).
fn unit_for(total: Duration) -> (&'static str, f64) {
    let ns = total.as_nanos() as f64;
    if ns < 10_000.0 {
        ("ns", 1.0)
    } else if ns < 10_000_000.0 {
        ("µs", 1e3)
    } else if ns < 10_000_000_000.0 {
        ("ms", 1e6)
    } else {
        ("s", 1e9)
    }
}

/// Formats `ns` in `unit` with as few decimals as the tick step needs.
fn format_time(ns: f64, unit: (&str, f64), step_ns: f64) -> String {
    let value = ns / unit.1;
    let step = step_ns / unit.1;
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil().clamp(0.0, 6.0) as usize
    };
    format!("{value:.decimals$} {}", unit.0)
}

/// A 1-2-5 tick step giving about `target` ticks over `total_ns`.
fn tick_step(total_ns: f64, target: f64) -> f64 {
    let raw = (total_ns / target).max(1.0);
    let magnitude = 10f64.powf(raw.log10().floor());
    let normalized = raw / magnitude;
    let nice = if normalized <= 1.0 {
        1.0
    } else if normalized <= 2.0 {
        2.0
    } else if normalized <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

/// `bytes` in the largest binary unit that keeps the value at least 1, one decimal.
fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Roughly how wide `text` is at 11 px.
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * 6.4
}

/// Picks a lane's strip: (top, height).
type StripOf = fn(&Geometry, usize) -> (f64, f64);

struct Geometry {
    plot_width: f64,
    total_ns: f64,
    lane_height: f64,
    two_strips: bool,
}

impl Geometry {
    fn x(&self, at: Duration) -> f64 {
        LEFT + at.as_nanos() as f64 / self.total_ns * self.plot_width
    }
    fn lane_top(&self, lane: usize) -> f64 {
        TOP + lane as f64 * (self.lane_height + LANE_GAP)
    }
    /// (top, height) of the strip where the op's main box goes: the device strip when the
    /// trace has device spans.
    fn main_strip(&self, lane: usize) -> (f64, f64) {
        let top = self.lane_top(lane);
        if self.two_strips {
            (top + 4.0 + HOST_STRIP + 3.0, DEVICE_STRIP)
        } else {
            (top + 4.0, DEVICE_STRIP)
        }
    }
    fn host_strip(&self, lane: usize) -> (f64, f64) {
        (self.lane_top(lane) + 4.0, HOST_STRIP)
    }
}

fn op_title(op: &TracedOp, unit: (&str, f64), step_ns: f64) -> String {
    let span_text = |span: Span| {
        format!(
            "{} → {} ({})",
            format_time(span.start.as_nanos() as f64, unit, step_ns / 100.0),
            format_time(span.end.as_nanos() as f64, unit, step_ns / 100.0),
            format_time(span.duration().as_nanos() as f64, unit, step_ns / 100.0),
        )
    };
    let mut title = format!(
        "{} [{}]\nhost submit {}",
        op.name(),
        op.op,
        span_text(op.host)
    );
    if let Some(device) = op.device {
        let _ = write!(title, "\ndevice {}", span_text(device));
    }
    escape(&title)
}

fn draw_box(
    out: &mut String,
    geometry: &Geometry,
    span: Span,
    (top, height): (f64, f64),
    category: Category,
    opacity: f64,
) -> (f64, f64) {
    let x0 = geometry.x(span.start);
    let width = (geometry.x(span.end) - x0).max(1.5);
    let (fill, _) = category.colours();
    let _ = write!(
        out,
        "<rect x=\"{x0:.2}\" y=\"{top:.2}\" width=\"{width:.2}\" height=\"{height:.2}\" rx=\"2\" \
         fill=\"{fill}\" fill-opacity=\"{opacity}\" stroke=\"#ffffff\" stroke-width=\"0.6\"/>"
    );
    (x0, width)
}

pub(super) fn render(trace: &Trace) -> String {
    let two_strips = trace.ops.iter().any(|op| op.device.is_some());
    let lane_height = if two_strips {
        4.0 + HOST_STRIP + 3.0 + DEVICE_STRIP + 4.0
    } else {
        4.0 + DEVICE_STRIP + 4.0
    };
    let last_sample = trace
        .pools
        .iter()
        .filter_map(|pool| pool.samples.last())
        .map(|sample| sample.at)
        .max()
        .unwrap_or_default();
    let end = trace.end().max(last_sample).max(Duration::from_nanos(1));
    let step_ns = tick_step(end.as_nanos() as f64, 10.0);
    // A little room after the last op; ticks stop inside the axis.
    let total_ns = end.as_nanos() as f64 * 1.02;
    let geometry = Geometry {
        plot_width: WIDTH - LEFT - RIGHT,
        total_ns,
        lane_height,
        two_strips,
    };
    let unit = unit_for(Duration::from_nanos(total_ns as u64));
    let lanes = trace.streams.len();
    let lanes_bottom = geometry.lane_top(lanes) - LANE_GAP;
    let categories: Vec<Category> = Category::ALL
        .into_iter()
        .filter(|c| trace.ops.iter().any(|op| Category::of(op.op) == *c))
        .collect();
    let pools_top = lanes_bottom.max(TOP) + 12.0;
    let pool_tracks = trace.pools.len() as f64;
    let charts_bottom = if trace.pools.is_empty() {
        lanes_bottom.max(TOP)
    } else {
        pools_top + pool_tracks * POOL_TRACK + (pool_tracks - 1.0) * LANE_GAP
    };
    let legend_top = charts_bottom + 34.0;
    let has_pools = !trace.pools.is_empty();
    let legend_rows = legend_layout(&categories, two_strips, !trace.flows.is_empty(), has_pools).1;
    let height = legend_top + legend_rows as f64 * 20.0 + 14.0;

    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {WIDTH} {height:.0}\" {FONT} font-size=\"11\">"
    );
    out.push_str(
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" \
         markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" \
         fill=\"#222222\"/></marker></defs>\n",
    );
    out.push_str("<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");

    // Title.
    let places: Vec<String> = {
        let mut names: Vec<String> = Vec::new();
        for stream in &trace.streams {
            let name = stream.place.to_string();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    };
    let _ = writeln!(
        out,
        "<text x=\"16\" y=\"24\" font-size=\"15\" font-weight=\"bold\" fill=\"#1d1d1d\">devstream \
         timeline: {}</text>\
         <text x=\"16\" y=\"41\" fill=\"#555555\">{} streams, {} ops, {} waits, {}{}</text>",
        escape(&places.join(", ")),
        lanes,
        trace.ops.len(),
        trace.flows.len(),
        format_time(end.as_nanos() as f64, unit, step_ns / 100.0),
        if two_strips {
            " (device times from timed events)"
        } else {
            " (host submit times only)"
        },
    );

    // Axis: ticks, labels, grid lines through the lanes.
    out.push_str("<g class=\"axis\">\n");
    let tick_count = (total_ns / step_ns).floor() as usize;
    for tick in 0..=tick_count {
        let at_ns = tick as f64 * step_ns;
        let x = LEFT + at_ns / total_ns * geometry.plot_width;
        let _ = writeln!(
            out,
            "<line x1=\"{x:.2}\" y1=\"{:.2}\" x2=\"{x:.2}\" y2=\"{:.2}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{x:.2}\" y=\"{:.2}\" text-anchor=\"middle\" fill=\"#555555\">{}</text>",
            TOP - 6.0,
            charts_bottom,
            TOP - 10.0,
            format_time(at_ns, unit, step_ns),
        );
    }
    out.push_str("</g>\n");

    // Lanes.
    for (lane, stream) in trace.streams.iter().enumerate() {
        let top = geometry.lane_top(lane);
        let background = if lane % 2 == 0 { "#f6f7f9" } else { "#eef0f3" };
        let _ = writeln!(
            out,
            "<g class=\"lane\" data-stream=\"{}\">\
             <rect x=\"8\" y=\"{top:.2}\" width=\"{:.2}\" height=\"{lane_height:.2}\" \
             fill=\"{background}\" fill-opacity=\"0.7\"/>\
             <text x=\"16\" y=\"{:.2}\" font-weight=\"bold\" fill=\"#1d1d1d\">{}</text>\
             <text x=\"16\" y=\"{:.2}\" fill=\"#666666\" font-size=\"10\">{} · id {} · {:?}</text>",
            stream.id,
            WIDTH - 8.0 - RIGHT + 16.0,
            top + lane_height / 2.0 - 2.0,
            escape(&stream.name),
            top + lane_height / 2.0 + 11.0,
            escape(&stream.place.to_string()),
            stream.id,
            stream.priority,
        );
        for op in trace.ops_of(lane) {
            let category = Category::of(op.op);
            let title = op_title(op, unit, step_ns);
            out.push_str("<g>");
            let _ = write!(out, "<title>{title}</title>");
            if two_strips {
                draw_box(
                    &mut out,
                    &geometry,
                    op.host,
                    geometry.host_strip(lane),
                    category,
                    0.45,
                );
            }
            let main = op.device.or(if two_strips { None } else { Some(op.host) });
            if let Some(span) = main {
                let strip = geometry.main_strip(lane);
                let (x0, width) = draw_box(&mut out, &geometry, span, strip, category, 1.0);
                let label = op.name();
                // 11 px where it fits, else 9 px, else only the tooltip.
                let size = [11.0, 9.0]
                    .into_iter()
                    .find(|size| width >= text_width(label) * size / 11.0 + 6.0);
                if let Some(size) = size {
                    let (_, ink) = category.colours();
                    let _ = write!(
                        out,
                        "<text x=\"{:.2}\" y=\"{:.2}\" text-anchor=\"middle\" \
                         font-size=\"{size}\" fill=\"{ink}\">{}</text>",
                        x0 + width / 2.0,
                        strip.0 + strip.1 / 2.0 + size * 0.36,
                        escape(label)
                    );
                }
            }
            out.push_str("</g>\n");
        }
        out.push_str("</g>\n");
    }

    // Pools: a step chart each, under the lanes.
    for (index, pool) in trace.pools.iter().enumerate() {
        let top = pools_top + index as f64 * (POOL_TRACK + LANE_GAP);
        draw_pool(&mut out, &geometry, pool, top, end);
    }

    // Flows: from where the source op ended to where the waiting op was released.
    out.push_str("<g class=\"flows\" fill=\"none\" stroke=\"#222222\" stroke-width=\"1.1\">\n");
    for flow in &trace.flows {
        let (from, to) = (&trace.ops[flow.from], &trace.ops[flow.to]);
        let (from_span, to_span, strip): (Span, Span, StripOf) = match (from.device, to.device) {
            (Some(f), Some(t)) => (f, t, Geometry::main_strip),
            _ if two_strips => (from.host, to.host, Geometry::host_strip),
            _ => (from.host, to.host, Geometry::main_strip),
        };
        let (from_top, from_height) = strip(&geometry, from.stream);
        let (to_top, to_height) = strip(&geometry, to.stream);
        let x1 = geometry.x(from_span.end);
        let x2 = geometry.x(to_span.end).max(x1);
        let (y1, y2) = if to_top > from_top {
            (from_top + from_height, to_top)
        } else if to_top < from_top {
            (from_top, to_top + to_height)
        } else {
            (from_top + from_height / 2.0, to_top + to_height / 2.0)
        };
        let bend = (y2 - y1) / 2.0;
        let dash = match flow.kind {
            FlowKind::Event => "",
            FlowKind::Stream => " stroke-dasharray=\"4 2\"",
        };
        let _ = writeln!(
            out,
            "<path d=\"M{x1:.2},{y1:.2} C{x1:.2},{:.2} {x2:.2},{:.2} {x2:.2},{y2:.2}\"{dash} \
             marker-end=\"url(#arrow)\"/>",
            y1 + bend,
            y2 - bend,
        );
    }
    out.push_str("</g>\n");

    // Legend.
    out.push_str("<g class=\"legend\">\n");
    let (items, _) = legend_layout(&categories, two_strips, !trace.flows.is_empty(), has_pools);
    for (row, column_x, item) in items {
        let y = legend_top + row as f64 * 20.0;
        match item {
            LegendItem::Category(category) => {
                let (fill, _) = category.colours();
                let _ = writeln!(
                    out,
                    "<rect x=\"{column_x:.2}\" y=\"{:.2}\" width=\"14\" height=\"11\" rx=\"2\" \
                     fill=\"{fill}\"/><text x=\"{:.2}\" y=\"{:.2}\" fill=\"#333333\">{}</text>",
                    y - 9.0,
                    column_x + 19.0,
                    y,
                    escape(category.legend()),
                );
            }
            LegendItem::Strips => {
                let _ = writeln!(
                    out,
                    "<rect x=\"{column_x:.2}\" y=\"{:.2}\" width=\"14\" height=\"4\" fill=\"#4e79a7\" \
                     fill-opacity=\"0.45\"/><rect x=\"{column_x:.2}\" y=\"{:.2}\" width=\"14\" \
                     height=\"7\" fill=\"#4e79a7\"/><text x=\"{:.2}\" y=\"{:.2}\" fill=\"#333333\">\
                     thin: host submit · tall: device execution</text>",
                    y - 11.0,
                    y - 5.0,
                    column_x + 19.0,
                    y,
                );
            }
            LegendItem::Pool => {
                let _ = writeln!(
                    out,
                    "<path d=\"M{column_x:.2},{:.2} H{:.2}\" stroke=\"{RESERVED_COLOUR}\" \
                     stroke-width=\"2.2\"/><path d=\"M{column_x:.2},{:.2} H{:.2}\" \
                     stroke=\"{USED_COLOUR}\" stroke-width=\"1.2\"/><text x=\"{:.2}\" \
                     y=\"{:.2}\" fill=\"#333333\">{POOL_LEGEND}</text>",
                    y - 8.0,
                    column_x + 14.0,
                    y - 2.0,
                    column_x + 14.0,
                    column_x + 19.0,
                    y,
                );
            }
            LegendItem::Flow => {
                let _ = writeln!(
                    out,
                    "<path d=\"M{column_x:.2},{:.2} L{:.2},{:.2}\" stroke=\"#222222\" \
                     stroke-width=\"1.1\" marker-end=\"url(#arrow)\"/><text x=\"{:.2}\" \
                     y=\"{:.2}\" fill=\"#333333\">waits on (dashed: wait_stream)</text>",
                    y - 4.0,
                    column_x + 16.0,
                    y - 4.0,
                    column_x + 22.0,
                    y,
                );
            }
        }
    }
    out.push_str("</g>\n</svg>\n");
    out
}

/// Draws `pool`'s track at `top`: its name and peaks on the left; on the time axis its
/// reserved and used bytes as steps (each sample's value held until the next sample, the last
/// until `end`), scaled so that the highest value reaches the top of the chart.
fn draw_pool(out: &mut String, geometry: &Geometry, pool: &PoolTrack, top: f64, end: Duration) {
    let peak_reserved = pool.samples.iter().map(|s| s.reserved_bytes).max();
    let peak_used = pool.samples.iter().map(|s| s.used_bytes).max();
    let (peak_reserved, peak_used) = (peak_reserved.unwrap_or(0), peak_used.unwrap_or(0));
    let scale = peak_reserved.max(peak_used).max(1) as f64;
    let (chart_top, chart_bottom) = (top + POOL_MARGIN, top + POOL_TRACK - POOL_MARGIN);
    let y = |bytes: u64| chart_bottom - bytes as f64 / scale * (chart_bottom - chart_top);
    let peaks = format!(
        "peak reserved {} · peak used {}",
        format_bytes(peak_reserved),
        format_bytes(peak_used)
    );
    let _ = write!(
        out,
        "<g class=\"pool\" data-pool=\"{}\"><title>{}: {}</title>\
         <rect x=\"8\" y=\"{top:.2}\" width=\"{:.2}\" height=\"{POOL_TRACK:.2}\" \
         fill=\"#f3f6f9\"/>\
         <line x1=\"{LEFT:.2}\" y1=\"{chart_bottom:.2}\" x2=\"{:.2}\" y2=\"{chart_bottom:.2}\" \
         stroke=\"#c8c8c8\"/>\
         <text x=\"16\" y=\"{:.2}\" font-weight=\"bold\" fill=\"#1d1d1d\">{}</text>\
         <text x=\"16\" y=\"{:.2}\" fill=\"#666666\" font-size=\"10\">{} · peak reserved {}</text>\
         <text x=\"16\" y=\"{:.2}\" fill=\"#666666\" font-size=\"10\">peak used {}</text>",
        pool.id,
        escape(&pool.name),
        escape(&peaks),
        WIDTH - 8.0 - RIGHT + 16.0,
        WIDTH - RIGHT,
        top + 13.0,
        escape(&pool.name),
        top + 26.0,
        escape(&pool.place.to_string()),
        format_bytes(peak_reserved),
        top + 38.0,
        format_bytes(peak_used),
    );
    let end_x = geometry.x(end);
    for counter in POOL_COUNTERS {
        let mut samples = pool.samples.iter();
        let Some(first) = samples.next() else {
            break;
        };
        let bytes = counter.bytes;
        let mut d = format!("M{:.2},{:.2}", geometry.x(first.at), y(bytes(first)));
        for sample in samples {
            let _ = write!(d, " H{:.2} V{:.2}", geometry.x(sample.at), y(bytes(sample)));
        }
        let _ = write!(d, " H{end_x:.2}");
        let _ = write!(
            out,
            "<path class=\"{}\" d=\"{d}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"/>",
            counter.class, counter.colour, counter.width
        );
    }
    out.push_str("</g>\n");
}

/// One of a pool's counters as the chart draws it.
struct PoolCounter {
    /// The path's `class` attribute.
    class: &'static str,
    colour: &'static str,
    width: f64,
    /// The counter's value in a sample.
    bytes: fn(&PoolSample) -> u64,
}

/// The counters of a pool's chart: reserved (thick, drawn first) and used (thin, on top).
const POOL_COUNTERS: [PoolCounter; 2] = [
    PoolCounter {
        class: "reserved",
        colour: RESERVED_COLOUR,
        width: 2.2,
        bytes: |s| s.reserved_bytes,
    },
    PoolCounter {
        class: "used",
        colour: USED_COLOUR,
        width: 1.2,
        bytes: |s| s.used_bytes,
    },
];

/// The legend text of a pool's chart.
const POOL_LEGEND: &str = "pool bytes: reserved (thick) · used (thin)";

#[derive(Clone, Copy)]
enum LegendItem {
    Category(Category),
    Strips,
    Flow,
    Pool,
}

/// Places legend items left to right, wrapping: (row, x, item) and the number of rows.
fn legend_layout(
    categories: &[Category],
    two_strips: bool,
    flows: bool,
    pools: bool,
) -> (Vec<(usize, f64, LegendItem)>, usize) {
    let mut items: Vec<(LegendItem, f64)> = categories
        .iter()
        .map(|&c| (LegendItem::Category(c), text_width(c.legend()) + 36.0))
        .collect();
    if flows {
        items.push((
            LegendItem::Flow,
            text_width("waits on (dashed: wait_stream)") + 40.0,
        ));
    }
    if pools {
        items.push((LegendItem::Pool, text_width(POOL_LEGEND) + 36.0));
    }
    if two_strips {
        items.push((
            LegendItem::Strips,
            text_width("thin: host submit · tall: device execution") + 36.0,
        ));
    }
    let mut placed = Vec::new();
    let (mut row, mut x) = (0usize, 16.0);
    for (item, width) in items {
        if x + width > WIDTH - RIGHT && x > 16.0 {
            row += 1;
            x = 16.0;
        }
        placed.push((row, x, item));
        x += width;
    }
    let rows = if placed.is_empty() { 0 } else { row + 1 };
    (placed, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_one_two_five() {
        assert_eq!(tick_step(10_000_000.0, 10.0), 1_000_000.0);
        assert_eq!(tick_step(17_000_000.0, 10.0), 2_000_000.0);
        assert_eq!(tick_step(42_000.0, 10.0), 5_000.0);
        assert_eq!(tick_step(3.0, 10.0), 1.0);
    }

    #[test]
    fn times_read_in_a_fitting_unit() {
        let ms = unit_for(Duration::from_millis(25));
        assert_eq!(format_time(2_000_000.0, ms, 2_000_000.0), "2 ms");
        assert_eq!(format_time(2_500_000.0, ms, 500_000.0), "2.5 ms");
        let us = unit_for(Duration::from_micros(300));
        assert_eq!(format_time(50_000.0, us, 50_000.0), "50 µs");
    }

    #[test]
    fn bytes_read_in_a_binary_unit() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1 << 20), "1.0 MiB");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
    }

    #[test]
    fn markup_is_escaped() {
        assert_eq!(escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(escape("bell\u{7}"), "bell");
    }

    #[test]
    fn categories_cover_the_ops() {
        assert_eq!(Category::of("copy_host_to_device"), Category::HostToDevice);
        assert_eq!(Category::of("wait_stream"), Category::Wait);
        assert_eq!(Category::of("synchronize"), Category::HostOnly);
        for category in Category::ALL {
            assert!(!category.legend().is_empty());
        }
    }

    #[test]
    fn legend_wraps_within_the_width() {
        let (items, rows) = legend_layout(&Category::ALL, true, true, true);
        assert_eq!(items.len(), Category::ALL.len() + 3);
        assert!(rows >= 2);
        for (_, x, _) in items {
            assert!(x < WIDTH - RIGHT);
        }
    }
}
