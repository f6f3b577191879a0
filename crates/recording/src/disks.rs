//! Mount points from the operator's patterns: `--disks /mnt/disk0,/mnt/disk1`, a glob
//! (`/mnt/disk*`, `/mnt/disks/*/*`), or both. Only directories count; the list is sorted and
//! free of repeats, so the same patterns always give the same disk order.

use std::path::PathBuf;

use crate::error::ScanError;

/// The directories `patterns` name (each a path or a glob; a comma separates several in one
/// string). An error when a pattern is malformed or nothing matches at all.
pub fn expand<S: AsRef<str>>(patterns: &[S]) -> Result<Vec<PathBuf>, ScanError> {
    let mut out = Vec::new();
    let mut all = Vec::new();
    for p in patterns {
        for pattern in p.as_ref().split(',').map(str::trim).filter(|s| !s.is_empty()) {
            all.push(pattern.to_string());
            let paths = glob::glob(pattern).map_err(|e| ScanError::Pattern {
                pattern: pattern.to_string(),
                message: e.to_string(),
            })?;
            // Entries the glob could not read (permission) are skipped: not a disk of ours.
            out.extend(paths.filter_map(Result::ok).filter(|d| d.is_dir()));
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(ScanError::NoDisks(all.join(",")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_lists_give_sorted_directories() {
        let d = tempfile::tempdir().unwrap();
        for n in ["disk2", "disk0", "disk1"] {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        std::fs::write(d.path().join("disk9"), b"a file, not a disk").unwrap();
        let root = d.path().display();
        let got = expand(&[format!("{root}/disk*")]).unwrap();
        let names: Vec<_> = got.iter().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["disk0", "disk1", "disk2"]);
        let listed = expand(&[format!("{root}/disk1,{root}/disk0, {root}/disk1")]).unwrap();
        assert_eq!(listed.len(), 2);
        assert!(matches!(
            expand(&[format!("{root}/nothing*")]),
            Err(ScanError::NoDisks(_))
        ));
        assert!(matches!(expand(&["[".to_string()]), Err(ScanError::Pattern { .. })));
    }
}
