//! `evlbi report`: figures and one self-contained HTML page from result JSON files.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use report::export::{CsvExporter, Exporter, HtmlExporter, JsonExporter, TextExporter};
use report::inputs::{Input, InputError};

use crate::flags::JsonOutput;
use crate::{usage, usage_of};

/// Arguments of `evlbi report`.
#[derive(Args)]
#[command(
    after_help = "Inputs may be probe trials (evlbi probe client --export-json r.json), probe sweeps, TCP tests \
(evlbi probe client --tcp --export-json t.json), CPU-load sweeps (--cpu-load-sweep), receive-buffer sweeps \
(--rcvbuf-sweep), host timing floors (evlbi probe host-jitter --export-json), stream send/recv reports (--export-json \
of evlbi stream send|recv), evlbi send reports, evlbi linkemu summaries and scripts/demo.sh's report.json; the kind is \
detected from the JSON.\n\nFigures go to <OUT stem>_files/ beside the page (PNG and SVG; SVG only when the \
font is missing).\n\nExamples:\n  evlbi report r1.json r2.json -o out/report.html\n  evlbi report \
out/demo/report.json -o out/demo/report.html --json\n\nExit codes: 0 ok, 1 unreadable data or figures not \
written, 2 usage error (missing file, JSON of an unknown kind)."
)]
pub struct ReportArgs {
    /// Result JSON files.
    #[arg(required = true, value_name = "RESULT.json")]
    inputs: Vec<PathBuf>,
    /// The HTML page to write (its figures go beside it).
    #[arg(short, long, value_name = "report.html")]
    out: PathBuf,
    // --json, --export-json: the report (the struct the page shows) as JSON.
    #[command(flatten)]
    output: JsonOutput,
    /// Also write every headline number and table cell as CSV rows to FILE
    /// (section,source,table,row,column,value,unit,text).
    #[arg(long, value_name = "FILE")]
    export_csv: Option<PathBuf>,
    /// Also write the report as text lines to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    export_text: Option<PathBuf>,
    /// TrueType font for PNG text (SVG text is rendered by the viewer).
    #[arg(long, value_name = "TTF", default_value = report::DEFAULT_FONT)]
    font: PathBuf,
}

/// Most bytes of a result file `evlbi report` reads (the largest results, per-packet series of
/// long trials, are tens of megabytes).
const MAX_INPUT_BYTES: u64 = 256 << 20;
/// Most bytes of a font file.
const MAX_FONT_BYTES: u64 = 64 << 20;

/// `path` read whole through the one bounded reader, as an io error for the report crate.
fn bounded(max: u64) -> impl Fn(&Path) -> std::io::Result<Vec<u8>> {
    move |p| crate::read_named(p, max).map_err(std::io::Error::other)
}

fn load(path: &Path) -> anyhow::Result<Input> {
    match report::inputs::load(path, bounded(MAX_INPUT_BYTES)) {
        Ok(i) => Ok(i),
        // The wrong file on the command line is a usage error; a damaged result file is not.
        Err(e @ (InputError::UnknownKind { .. } | InputError::Read { .. })) => Err(usage_of(e)),
        Err(e) => Err(e.into()),
    }
}

/// Run `evlbi report`.
pub fn run(a: ReportArgs) -> anyhow::Result<()> {
    if a.out.extension().is_none_or(|e| e != "html" && e != "htm") {
        return Err(usage(format!("--out {} must name an .html file", a.out.display())));
    }
    let inputs = a
        .inputs
        .iter()
        .map(|p| Ok((p.display().to_string(), load(p)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let Err(e) = report::load_font(&a.font, bounded(MAX_FONT_BYTES)) {
        eprintln!("warning: {e}; writing SVG figures only (scripts/setup.sh installs fonts-dejavu-core)");
    }
    let base = a
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(base).with_context(|| format!("cannot create {}", base.display()))?;
    let report = report::page::build(&inputs, &a.out)?;
    // Every view is an Exporter of the one report struct (report::export).
    let html = HtmlExporter {
        base: base.to_path_buf(),
    };
    write_view(&a.out, &html.serialize(&report)?)?;
    if let Some(p) = &a.export_csv {
        write_view(p, &CsvExporter.serialize(&report)?)?;
    }
    if let Some(p) = &a.export_text {
        write_view(p, &TextExporter.serialize(&report)?)?;
    }
    let json = JsonExporter.serialize(&report)?;
    if let Some(p) = &a.output.export_json {
        write_view(p, &json)?;
    }
    if a.output.json {
        // print!, not write_all: a closed stdout takes the panic hook's exit 141 like every command.
        print!("{}", String::from_utf8_lossy(&json));
    } else {
        let figs: Vec<_> = report.figures().collect();
        let pngs = figs.iter().filter(|f| f.png.is_some()).count();
        println!(
            "{}: {} sections, {} figures ({} PNG + {} SVG in {}/)",
            a.out.display(),
            report.sections.len(),
            figs.len(),
            pngs,
            figs.len(),
            base.join(&report.figures_dir).display()
        );
        for w in &report.warnings {
            eprintln!("warning: {w}");
        }
    }
    Ok(())
}

/// Write one view to `path` (`-`: stdout).
fn write_view(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if path == Path::new("-") {
        print!("{}", String::from_utf8_lossy(bytes));
        return Ok(());
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}
