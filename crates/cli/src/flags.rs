//! The flags commands share, with one meaning each (hyperfine's vocabulary):
//!
//! - `--json`: print the command's JSON result on stdout (a switch, everywhere);
//! - `--export-json FILE`: write the same JSON to FILE (text may still go to stdout);
//! - `--out`: the data a command produces (a directory of recordings, a generated file), never
//!   a JSON result;
//! - `-q/--quiet`: no live lines or progress bar (`shared_args::QuietArg`, the one declaration).
//!
//! Old spellings stay hidden for one release, each with a note on stderr when used:
//! `--out FILE` where it meant the JSON result (probe client, probe host-jitter, send, stream
//! send), and `stream recv --json FILE`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;

/// `--json` and `--export-json`: where a command's JSON result goes.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonOutput {
    /// Print the result as JSON on stdout (instead of the text view).
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON result to FILE (with or without --json).
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
}

impl JsonOutput {
    /// Write the JSON where asked; `true` when the text view should be printed too.
    pub fn emit<T: serde::Serialize>(&self, value: &T) -> Result<bool> {
        write_json(value, self.export_json.as_deref(), self.json)?;
        Ok(!self.json)
    }

    /// For commands that report one result per event (a server's sessions, a receiver's files):
    /// a writer of JSON Lines to stdout (--json) and to the --export-json file (created now,
    /// one line appended per event).
    pub fn lines(&self) -> Result<JsonLines> {
        let file = match &self.export_json {
            None => None,
            Some(p) => Some((
                std::fs::File::create(p).with_context(|| format!("cannot write {}", p.display()))?,
                p.clone(),
            )),
        };
        Ok(JsonLines {
            stdout: self.json,
            file,
        })
    }
}

/// JSON Lines on stdout and/or into a file: see [`JsonOutput::lines`].
pub struct JsonLines {
    stdout: bool,
    file: Option<(std::fs::File, PathBuf)>,
}

impl JsonLines {
    /// Whether anything is written (the text view is printed when stdout gets no JSON).
    pub fn to_stdout(&self) -> bool {
        self.stdout
    }

    /// One line. A failed write to the file is said on stderr, not fatal: a server keeps serving.
    pub fn emit<T: serde::Serialize>(&mut self, value: &T) {
        let line = serde_json::to_string(value).unwrap_or_default();
        if self.stdout {
            println!("{line}");
        }
        if let Some((f, p)) = &mut self.file {
            if let Err(e) = writeln!(f, "{line}") {
                status!("warning: cannot write {}: {e}", p.display());
            }
        }
    }
}

/// The flags of a one-shot command with a result: `--json`, `--export-json`, `-q`, and the hidden
/// old `--out FILE` for the JSON file.
#[derive(Args, Debug, Clone, Default)]
pub struct ResultOutput {
    #[command(flatten)]
    pub result: JsonOutput,
    #[command(flatten)]
    legacy: LegacyJsonOut,
    #[command(flatten)]
    pub quiet: crate::shared_args::QuietArg,
}

impl ResultOutput {
    /// Whether the JSON goes to stdout (then no text view and no bar).
    pub fn json(&self) -> bool {
        self.result.json
    }

    /// The file the JSON is written to: --export-json, or the old --out.
    pub fn export_path(&self) -> Option<&Path> {
        self.result.export_json.as_deref().or(self.legacy.out.as_deref())
    }

    /// A progress bar, hidden with --quiet or --json.
    pub fn bar(&self, total: u64, template: &str) -> indicatif::ProgressBar {
        crate::progress_bar(total, self.quiet.quiet || self.result.json, template)
    }

    /// Write the JSON where asked; `true` when the text view should be printed too.
    pub fn emit<T: serde::Serialize>(&self, value: &T) -> Result<bool> {
        write_json(value, self.export_path(), self.result.json)?;
        Ok(!self.result.json)
    }
}

/// The hidden `--out FILE` of commands whose `--out` used to be the JSON result file: the same
/// as `--export-json FILE`, with a note on stderr. Kept for one release.
#[derive(Args, Debug, Clone, Default)]
pub struct LegacyJsonOut {
    /// Old spelling of --export-json FILE.
    #[arg(long = "out", hide = true, value_name = "FILE", conflicts_with = "export_json", value_parser = legacy_out)]
    pub out: Option<PathBuf>,
}

impl LegacyJsonOut {
    /// `output` with the old `--out FILE` folded into `--export-json`.
    pub fn apply(&self, output: &JsonOutput) -> JsonOutput {
        JsonOutput {
            json: output.json,
            export_json: output.export_json.clone().or_else(|| self.out.clone()),
        }
    }
}

/// `--json` and `--export-json` of `stream recv`, whose `--json` used to take the summary file:
/// `--json` alone prints the JSON on stdout; `--json FILE` (hidden, with a note on stderr) is
/// the old spelling of `--export-json FILE`.
#[derive(Args, Debug, Clone, Default)]
pub struct JsonOutputOldFile {
    /// Print the result as JSON on stdout. (`--json FILE` is the old spelling of --export-json FILE.)
    #[arg(long, num_args = 0..=1, value_name = "FILE", value_parser = legacy_json_file)]
    json: Option<Option<PathBuf>>,
    /// Also write the JSON result to FILE (with or without --json).
    #[arg(long, value_name = "FILE")]
    export_json: Option<PathBuf>,
}

impl JsonOutputOldFile {
    /// As the flags of every other command; the old `--json FILE` beside `--export-json` is a
    /// usage error.
    pub fn resolve(&self) -> Result<JsonOutput> {
        Ok(match (&self.json, &self.export_json) {
            (Some(Some(_)), Some(_)) => {
                return Err(crate::usage(
                    "--json FILE is the old spelling of --export-json FILE: give one of them",
                ))
            }
            (Some(Some(file)), None) => JsonOutput {
                json: false,
                export_json: Some(file.clone()),
            },
            (json, export) => JsonOutput {
                json: json.is_some(),
                export_json: export.clone(),
            },
        })
    }
}

/// Say on stderr that an old spelling was used, and its replacement.
fn deprecated(old: &str, new: &str) {
    status!("note: `{old}` is deprecated and goes away in the next release; use `{new}`");
}

/// Value parser of the hidden `--out FILE` (JSON result).
fn legacy_out(s: &str) -> Result<PathBuf, String> {
    deprecated(&format!("--out {s}"), &format!("--export-json {s}"));
    Ok(PathBuf::from(s))
}

/// Value parser of `stream recv --json FILE`.
fn legacy_json_file(s: &str) -> Result<PathBuf, String> {
    deprecated(&format!("--json {s}"), &format!("--export-json {s}"));
    Ok(PathBuf::from(s))
}

/// A result as pretty JSON: written to `path` if given, printed on stdout if `stdout`.
pub fn write_json<T: serde::Serialize>(value: &T, path: Option<&Path>, stdout: bool) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    if let Some(p) = path {
        std::fs::write(p, format!("{text}\n")).with_context(|| format!("cannot write {}", p.display()))?;
    }
    if stdout {
        println!("{text}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Json {
        #[command(flatten)]
        o: JsonOutput,
    }

    #[derive(Parser, Debug)]
    struct Result_ {
        #[command(flatten)]
        o: ResultOutput,
    }

    /// A command with its own `--out` (data), as `vdif gen` and `stream recv`.
    #[derive(Parser, Debug)]
    struct DataOut {
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        o: JsonOutputOldFile,
        #[arg(long)]
        listen: Option<String>,
    }

    #[derive(Parser, Debug)]
    struct Legacy {
        #[command(flatten)]
        o: JsonOutput,
        #[command(flatten)]
        legacy: LegacyJsonOut,
    }

    fn p(s: &str) -> Option<PathBuf> {
        Some(PathBuf::from(s))
    }

    #[test]
    fn json_is_a_switch() {
        let a = Json::try_parse_from(["x", "--json"]).unwrap();
        assert_eq!(
            a.o,
            JsonOutput {
                json: true,
                export_json: None
            }
        );
        assert_eq!(Json::try_parse_from(["x"]).unwrap().o, JsonOutput::default());
        // A value after --json is not taken.
        let e = Json::try_parse_from(["x", "--json", "r.json"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = Json::try_parse_from(["x", "--json=r.json"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn export_json_takes_a_file() {
        let a = Json::try_parse_from(["x", "--export-json", "r.json"]).unwrap();
        assert_eq!(
            a.o,
            JsonOutput {
                json: false,
                export_json: p("r.json")
            }
        );
        let a = Json::try_parse_from(["x", "--export-json=r.json", "--json"]).unwrap();
        assert_eq!(
            a.o,
            JsonOutput {
                json: true,
                export_json: p("r.json")
            }
        );
        assert_eq!(Json::try_parse_from(["x", "--export-json"]).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn result_output_takes_the_old_out_hidden() {
        let a = Result_::try_parse_from(["x", "--out", "r.json", "-q"]).unwrap();
        assert_eq!(a.o.export_path(), Some(Path::new("r.json")));
        assert!(a.o.quiet.quiet && !a.o.json());
        let a = Result_::try_parse_from(["x", "--export-json", "n.json", "--json"]).unwrap();
        assert_eq!(a.o.export_path(), Some(Path::new("n.json")));
        assert!(a.o.json());
        // Both spellings at once is a usage error.
        let e = Result_::try_parse_from(["x", "--export-json", "a", "--out", "b"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        // The old spelling is not in the help.
        let help = <Result_ as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        assert!(help.contains("--export-json"), "{help}");
        assert!(!help.lines().any(|l| l.trim_start().starts_with("--out")), "{help}");
    }

    #[test]
    fn legacy_out_folds_into_export_json() {
        let a = Legacy::try_parse_from(["x", "--out", "old.json"]).unwrap();
        assert_eq!(
            a.legacy.apply(&a.o),
            JsonOutput {
                json: false,
                export_json: p("old.json")
            }
        );
        let a = Legacy::try_parse_from(["x", "--json", "--export-json", "new.json"]).unwrap();
        assert_eq!(
            a.legacy.apply(&a.o),
            JsonOutput {
                json: true,
                export_json: p("new.json")
            }
        );
    }

    #[test]
    fn stream_recv_json_takes_the_old_file_hidden() {
        let r = |args: &[&str]| {
            let mut v = vec!["x"];
            v.extend_from_slice(args);
            DataOut::try_parse_from(v)
                .map_err(|e| e.exit_code())
                .and_then(|a| Ok((a.out, a.o.resolve().map_err(|_| 2)?)))
        };
        assert_eq!(
            r(&["--json", "--out", "rx"]).unwrap(),
            (
                p("rx"),
                JsonOutput {
                    json: true,
                    export_json: None
                }
            )
        );
        assert_eq!(
            r(&["--out", "rx", "--json", "s.json", "--listen", "0"]).unwrap(),
            (
                p("rx"),
                JsonOutput {
                    json: false,
                    export_json: p("s.json")
                }
            )
        );
        assert_eq!(
            r(&["--json=s.json"]).unwrap(),
            (
                None,
                JsonOutput {
                    json: false,
                    export_json: p("s.json")
                }
            )
        );
        assert_eq!(
            r(&["--export-json", "s.json", "--listen", "0"]).unwrap(),
            (
                None,
                JsonOutput {
                    json: false,
                    export_json: p("s.json")
                }
            )
        );
        assert_eq!(
            r(&["--json", "--listen", "0"]).unwrap().1,
            JsonOutput {
                json: true,
                export_json: None
            }
        );
        assert_eq!(r(&[]).unwrap().1, JsonOutput::default());
        assert_eq!(
            r(&["--json", "--export-json", "s.json"]).unwrap().1,
            JsonOutput {
                json: true,
                export_json: p("s.json")
            }
        );
        assert_eq!(r(&["--json", "a", "--export-json", "b"]).unwrap_err(), 2);
    }

    #[test]
    fn json_written_to_a_file_is_what_stdout_gets() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("r.json");
        let o = JsonOutput {
            json: false,
            export_json: Some(f.clone()),
        };
        assert!(o.emit(&serde_json::json!({"a": 1})).unwrap());
        let text = std::fs::read_to_string(&f).unwrap();
        assert_eq!(
            text,
            format!(
                "{}\n",
                serde_json::to_string_pretty(&serde_json::json!({"a": 1})).unwrap()
            )
        );
        let mut lines = o.lines().unwrap();
        assert!(!lines.to_stdout());
        lines.emit(&1);
        lines.emit(&"two");
        drop(lines);
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "1\n\"two\"\n");
        let bad = JsonOutput {
            json: false,
            export_json: Some(dir.path().join("no/such/dir/r.json")),
        };
        assert!(bad.emit(&1).is_err());
        assert!(bad.lines().is_err());
    }
}
