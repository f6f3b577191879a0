//! The report as one self-contained HTML page: inline CSS, headline tables, figures as PNG
//! referenced relatively (linking the SVG), or the SVG inlined when no PNG was drawn. No network
//! access and no external script or style sheet are needed to open it.

use std::fmt::Write as _;
use std::path::Path;

use crate::page::{FigureRef, Report, Section, Table};
use crate::PlotError;

/// Text escaped for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1000px;\
color:#222;padding:0 1em}h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;margin-top:2em}\
table{border-collapse:collapse;margin:0.8em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}caption{text-align:left;font-weight:bold;\
padding:4px 0}figure{margin:1em 0}figure img,figure svg{max-width:100%;height:auto;border:1px solid #ddd}\
figcaption{font-size:0.9em;color:#555}.warn{color:#a40}";

/// After load, count the figures that rendered (an image decoded, or an inline SVG with content)
/// and any script errors, failed loads or console errors, into `data-` attributes of `<body>` that a headless browser can read.
const SELF_CHECK: &str = r#"(function () {
  var errors = 0;
  function count() { errors += 1; if (document.body) { document.body.dataset.errors = errors; } }
  window.addEventListener('error', count, true);
  var consoleError = console.error;
  console.error = function () { count(); consoleError.apply(console, arguments); };
  window.addEventListener('load', function () {
    var figs = document.querySelectorAll('figure[data-fig]');
    var ok = 0;
    figs.forEach(function (f) {
      var img = f.querySelector('img');
      var svg = f.querySelector('svg');
      if (img ? (img.complete && img.naturalWidth > 0) : (svg && svg.childElementCount > 0)) { ok += 1; }
    });
    document.body.dataset.figuresTotal = figs.length;
    document.body.dataset.figuresOk = ok;
    document.body.dataset.errors = errors;
  });
})();"#;

fn table(out: &mut String, t: &Table) {
    let _ = write!(out, "<table><caption>{}</caption><tr>", escape(&t.caption));
    for c in &t.columns {
        let _ = write!(out, "<th>{}</th>", escape(c));
    }
    out.push_str("</tr>\n");
    for row in &t.rows {
        out.push_str("<tr>");
        for c in row {
            let _ = write!(out, "<td>{}</td>", escape(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

fn figure(out: &mut String, f: &FigureRef, base: &Path) -> Result<(), PlotError> {
    let _ = write!(out, "<figure data-fig=\"{}\">", escape(&f.id));
    match &f.png {
        Some(png) => {
            let _ = write!(
                out,
                "<img src=\"{}\" alt=\"{}\" width=\"{}\" height=\"{}\">",
                escape(png),
                escape(&f.title),
                crate::chart::WIDTH,
                crate::chart::HEIGHT
            );
        }
        None => {
            let path = base.join(&f.svg);
            let svg = std::fs::read_to_string(&path).map_err(|source| PlotError::Io {
                what: "cannot read",
                path,
                source,
            })?;
            // Drop the XML declaration: it is not allowed inside HTML.
            let start = svg.find("<svg").unwrap_or(0);
            out.push_str(&svg[start..]);
        }
    }
    let _ = writeln!(
        out,
        "<figcaption>{} — <a href=\"{}\">SVG</a></figcaption></figure>",
        escape(&f.title),
        escape(&f.svg)
    );
    Ok(())
}

fn section(out: &mut String, s: &Section, base: &Path) -> Result<(), PlotError> {
    let _ = writeln!(out, "<section><h2>{}</h2>", escape(&s.heading));
    if !s.metrics.is_empty() {
        out.push_str("<table><caption>Headline numbers</caption><tr><th>quantity</th><th>value</th></tr>\n");
        for m in &s.metrics {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td></tr>",
                escape(&m.name),
                escape(&m.display())
            );
        }
        out.push_str("</table>\n");
    }
    for t in &s.tables {
        table(out, t);
    }
    for f in &s.figures {
        figure(out, f, base)?;
    }
    out.push_str("</section>\n");
    Ok(())
}

/// The page for `report`; `base` is the page's directory (to inline SVGs).
pub fn render(report: &Report, base: &Path) -> Result<String, PlotError> {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head>\n<body>\n<h1>{}</h1>\n<p>evlbi {} — {} figures</p>\n",
        escape(&report.title),
        escape(&report.title),
        escape(&report.tool_version),
        report.figures().count()
    );
    for w in &report.warnings {
        let _ = writeln!(out, "<p class=\"warn\">{}</p>", escape(w));
    }
    for s in &report.sections {
        section(&mut out, s, base)?;
    }
    let _ = write!(out, "<script>{SELF_CHECK}</script>\n</body></html>\n");
    Ok(out)
}
