//! A small SVG line chart (context tokens per call, one line per policy: `skald replay
//! --chart`; raw history against what was sent, on the dashboard's savings page). Written by hand: the
//! plotting crates need a font backend (system fonts through font-kit) to place labels, and this
//! chart needs only polylines, a few ticks and a legend.

use std::fmt::Write;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 180.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const COLORS: &[&str] = &[
    "#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
];

/// Escapes text for SVG.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" step for about `target` ticks over `max`.
fn tick_step(max: f64, target: f64) -> f64 {
    let raw = (max / target).max(1.0);
    let magnitude = 10f64.powf(raw.log10().floor());
    let norm = raw / magnitude;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

/// Renders `series` (name, y per call) as an SVG document.
pub fn line_chart(title: &str, y_label: &str, series: &[(String, Vec<u64>)]) -> String {
    let points = series
        .iter()
        .map(|(_, ys)| ys.len())
        .max()
        .unwrap_or(0)
        .max(2);
    let y_max = series
        .iter()
        .flat_map(|(_, ys)| ys.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let y_step = tick_step(y_max, 6.0);
    let y_top = (y_max / y_step).ceil() * y_step;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x_of = |i: usize| LEFT + plot_w * i as f64 / (points - 1) as f64;
    let y_of = |y: f64| TOP + plot_h * (1.0 - y / y_top);

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="24" font-size="16" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        escape(title)
    );
    let mut tick = 0.0;
    while tick <= y_top + 0.5 {
        let y = y_of(tick);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            tick as u64
        );
        tick += y_step;
    }
    let x_step = tick_step(points as f64, 10.0) as usize;
    let mut i = 0;
    while i < points {
        let x = x_of(i);
        let _ = writeln!(
            svg,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{i}</text>"#,
            TOP + plot_h + 18.0
        );
        i += x_step.max(1);
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">model call</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 10.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(y_label)
    );
    for (n, (name, ys)) in series.iter().enumerate() {
        let color = COLORS[n % COLORS.len()];
        let path: Vec<String> = ys
            .iter()
            .enumerate()
            .map(|(i, y)| format!("{:.1},{:.1}", x_of(i), y_of(*y as f64)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#,
            path.join(" ")
        );
        let ly = TOP + 10.0 + 20.0 * n as f64;
        let lx = LEFT + plot_w + 16.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            lx + 24.0,
            lx + 30.0,
            ly + 4.0,
            escape(name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_has_one_polyline_per_series_and_escapes_names() {
        let svg = line_chart(
            "t",
            "tokens",
            &[
                ("a<b".to_owned(), vec![1, 5, 3]),
                ("c".to_owned(), vec![2, 2]),
            ],
        );
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a&lt;b"));
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(tick_step(170_000.0, 6.0), 50_000.0);
        assert_eq!(tick_step(9.0, 10.0), 1.0);
    }
}
