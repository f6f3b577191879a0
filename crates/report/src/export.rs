//! Every view of a [`Report`] goes through one trait, the way hyperfine's exporters do: the
//! report struct is the source of truth, and JSON, CSV, text lines and the HTML page are
//! serialisations of it that cannot disagree with each other.
//!
//! `evlbi report` writes the page with [`HtmlExporter`] and, when asked, `--export-json`,
//! `--export-csv` and `--export-text` with the others.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::error::PlotError;
use crate::page::{Metric, Report, Table};

/// One serialisation of a report.
pub trait Exporter {
    /// The bytes of the file (or of stdout) for `report`.
    fn serialize(&self, report: &Report) -> Result<Vec<u8>, PlotError>;
}

/// Pretty-printed JSON of the whole report struct, newline-terminated.
pub struct JsonExporter;

/// Every headline number and every table cell as one CSV row:
/// `section,source,table,row,column,value,unit,text` (RFC 4180 quoting), for spreadsheets and
/// scripts that compare runs.
pub struct CsvExporter;

/// The report as text lines for a terminal or a log: headings, `name: value unit` lines and
/// tables with aligned columns.
pub struct TextExporter;

/// The self-contained HTML page; figure paths are relative to `base`, the page's directory.
pub struct HtmlExporter {
    /// Directory the page is written to.
    pub base: PathBuf,
}

impl Exporter for JsonExporter {
    fn serialize(&self, report: &Report) -> Result<Vec<u8>, PlotError> {
        let mut out = serde_json::to_vec_pretty(report).map_err(|e| PlotError::Export(e.to_string()))?;
        out.push(b'\n');
        Ok(out)
    }
}

/// Header of the CSV view.
pub const CSV_HEADER: &str = "section,source,table,row,column,value,unit,text";

impl Exporter for CsvExporter {
    fn serialize(&self, report: &Report) -> Result<Vec<u8>, PlotError> {
        let mut out = String::from(CSV_HEADER);
        out.push('\n');
        for s in &report.sections {
            for m in &s.metrics {
                let value = m.value.map(|v| v.to_string()).unwrap_or_default();
                let text = m.text.clone().unwrap_or_default();
                csv_row(
                    &mut out,
                    [&s.heading, &s.source, "", "", &m.name, &value, &m.unit, &text],
                );
            }
            for t in &s.tables {
                for (r, row) in t.rows.iter().enumerate() {
                    for (col, cell) in t.columns.iter().zip(row) {
                        csv_row(
                            &mut out,
                            [&s.heading, &s.source, &t.caption, &r.to_string(), col, cell, "", ""],
                        );
                    }
                }
            }
        }
        Ok(out.into_bytes())
    }
}

/// One CSV record; a field with a comma, quote or line break is quoted, quotes doubled (RFC 4180 §2).
fn csv_row<const N: usize>(out: &mut String, fields: [&str; N]) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if f.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&f.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(f);
        }
    }
    out.push('\n');
}

impl Exporter for TextExporter {
    fn serialize(&self, report: &Report) -> Result<Vec<u8>, PlotError> {
        let mut out = String::new();
        let _ = writeln!(out, "{} (evlbi {})", report.title, report.tool_version);
        for s in &report.sections {
            let _ = writeln!(out, "\n{}", s.heading);
            for m in &s.metrics {
                let _ = writeln!(out, "  {}: {}", m.name, metric_text(m));
            }
            for t in &s.tables {
                text_table(&mut out, t);
            }
            for f in &s.figures {
                let _ = writeln!(out, "  figure: {} ({})", f.title, f.svg);
            }
        }
        for w in &report.warnings {
            let _ = writeln!(out, "\nwarning: {w}");
        }
        Ok(out.into_bytes())
    }
}

fn metric_text(m: &Metric) -> String {
    match (m.value, &m.text) {
        (Some(v), _) if m.unit.is_empty() => format!("{v}"),
        (Some(v), _) => format!("{v} {}", m.unit),
        (None, Some(t)) => t.clone(),
        (None, None) => "—".into(),
    }
}

/// A table with columns padded to their widest cell.
fn text_table(out: &mut String, t: &Table) {
    let _ = writeln!(out, "  {}", t.caption);
    let mut width: Vec<usize> = t.columns.iter().map(|c| c.chars().count()).collect();
    for row in &t.rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells.iter().zip(&width).map(|(c, w)| format!("{c:>w$}")).collect();
        format!("    {}", padded.join("  "))
    };
    let _ = writeln!(out, "{}", line(&t.columns));
    for row in &t.rows {
        let _ = writeln!(out, "{}", line(row));
    }
}

impl Exporter for HtmlExporter {
    fn serialize(&self, report: &Report) -> Result<Vec<u8>, PlotError> {
        crate::html::render(report, &self.base).map(String::into_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{Section, REPORT_SCHEMA_VERSION};

    fn report() -> Report {
        Report {
            schema_version: REPORT_SCHEMA_VERSION,
            tool_version: "0.1.0".into(),
            title: "evlbi report".into(),
            figures_dir: "r_files".into(),
            sections: vec![Section {
                source: "a,b.json".into(),
                kind: None,
                heading: "1. probe trial".into(),
                metrics: vec![Metric {
                    name: "loss".into(),
                    value: Some(0.01),
                    unit: String::new(),
                    text: None,
                }],
                tables: vec![Table {
                    caption: "per \"size\"".into(),
                    columns: vec!["size B".into(), "rate".into()],
                    rows: vec![vec!["1472".into(), "1.2 Gb/s".into()]],
                }],
                figures: Vec::new(),
            }],
            warnings: vec!["no font".into()],
        }
    }

    #[test]
    fn the_views_carry_the_same_numbers() {
        let r = report();
        let json: Report = serde_json::from_slice(&JsonExporter.serialize(&r).unwrap()).unwrap();
        assert_eq!(json, r);
        let csv = String::from_utf8(CsvExporter.serialize(&r).unwrap()).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        // A source with a comma and a caption with quotes are quoted, quotes doubled.
        assert_eq!(lines[1], "1. probe trial,\"a,b.json\",,,loss,0.01,,");
        assert_eq!(
            lines[2],
            "1. probe trial,\"a,b.json\",\"per \"\"size\"\"\",0,size B,1472,,"
        );
        assert_eq!(
            lines[3],
            "1. probe trial,\"a,b.json\",\"per \"\"size\"\"\",0,rate,1.2 Gb/s,,"
        );
        let text = String::from_utf8(TextExporter.serialize(&r).unwrap()).unwrap();
        assert!(text.contains("  loss: 0.01\n"), "{text}");
        assert!(text.contains("    size B      rate\n      1472  1.2 Gb/s\n"), "{text}");
        assert!(text.contains("warning: no font"), "{text}");
    }
}
