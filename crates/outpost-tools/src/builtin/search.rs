//! search_files: find files under a folder by glob and/or content. The walk is the
//! `ignore` crate's (it honours .gitignore, .ignore and hidden files), globs are `globset`,
//! and content matching is `grep-searcher` with `grep-regex` on fixed strings. The root is
//! resolved once into a [`Resolved`](crate::paths::Resolved) and opened through its held
//! folder. The walker enumerates by path (that is how it reads .gitignore files), so
//! nothing it yields is trusted: every file is found again beneath the held root, one
//! folder handle at a time without following symlinks, and only what is found there is
//! reported (its size read through that handle) or read. A folder swapped for a symlink
//! during the walk can therefore not bring in names, sizes or content from elsewhere.
//! Protected files are skipped and counted, never read.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use outpost_policy::ToolHints;
use outpost_protocol::Map;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Result, ToolError};
use crate::paths::{Resolved, SafeRoot};
use crate::tool::{Access, Prepared, RunContext, Tool, ToolEnv, ToolSpec, parse_params, to_map};

/// Matching lines reported per file.
const LINES_PER_FILE: usize = 5;
/// Longest line text reported, in characters.
const MAX_LINE_CHARS: usize = 300;

/// Parameters of search_files.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchParams {
    /// The folder to search (absolute, or starting with `~/`).
    #[schemars(length(min = 1, max = 4096))]
    pub root: String,
    /// A glob on the path below root, e.g. "*.md" or "src/**/*.rs".
    #[schemars(length(min = 1, max = 1000))]
    pub glob: Option<String>,
    /// Text the file must contain (case-insensitive, not a regex).
    #[schemars(length(min = 1, max = 1000))]
    pub contains: Option<String>,
    /// Most files to return (default 100, at most 1000).
    #[schemars(range(min = 1, max = 1000))]
    pub max_results: Option<u32>,
}

/// One matching line.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineMatch {
    /// 1-based line number.
    pub line: u64,
    /// The line's text (cut at 300 characters).
    pub text: String,
}

/// One file found.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    /// Path relative to root.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// The first matching lines when `contains` was given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<LineMatch>,
}

/// Result of search_files.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchOutput {
    /// The resolved folder searched.
    pub root: String,
    /// Files found, in walk order.
    pub results: Vec<Hit>,
    /// True when maxResults cut the search short.
    pub truncated: bool,
    /// Files skipped because the secrets list or a deny rule protects them.
    pub withheld: u64,
}

/// search_files.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchFiles;

impl Tool for SearchFiles {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<SearchParams, SearchOutput>(
            "search_files",
            "Find files under a folder on the user's computer by glob and/or the text they \
             contain. Honours .gitignore and skips hidden and protected files.",
            ToolHints::READ_ONLY,
            30_000,
        )
    }

    fn prepare(&self, params: Map, env: &ToolEnv) -> Result<Prepared> {
        let p: SearchParams = parse_params(params)?;
        let held = Resolved::resolve(&env.home, "root", &p.root)?;
        let root = held.path().to_path_buf();
        let globs = match &p.glob {
            Some(g) => Some(build_glob(g)?),
            None => None,
        };
        if let Some(c) = &p.contains {
            // Checked here so a bad pattern is a parameter error, not a run failure.
            matcher(c)?;
        }
        let max = p.max_results.unwrap_or(100) as usize;
        let summary = match (&p.glob, &p.contains) {
            (Some(g), Some(c)) => format!(
                "Search {} for files matching {g} containing \"{c}\"",
                root.display()
            ),
            (Some(g), None) => format!("Search {} for files matching {g}", root.display()),
            (None, Some(c)) => format!("Search {} for files containing \"{c}\"", root.display()),
            (None, None) => format!("List the files under {}", root.display()),
        };
        Ok(Prepared {
            access: Access {
                summary,
                paths: vec![root.clone()],
                folder: Some(root),
                force_ask: None,
            },
            // Reported by the job, once the policy allowed the call.
            job: Box::new(move |cx| {
                cx.check()?;
                let safe = held.open_dir()?;
                search(cx, &safe, globs.as_ref(), p.contains.as_deref(), max)
            }),
        })
    }
}

fn build_glob(glob: &str) -> Result<GlobSet> {
    let bad = |e: globset::Error| ToolError::InvalidParameters(format!("glob: {e}"));
    let mut set = GlobSetBuilder::new();
    set.add(
        GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(bad)?,
    );
    if !glob.contains('/') {
        // A bare pattern like "*.md" matches at any depth.
        set.add(
            GlobBuilder::new(&format!("**/{glob}"))
                .literal_separator(true)
                .build()
                .map_err(bad)?,
        );
    }
    set.build().map_err(bad)
}

fn matcher(text: &str) -> Result<grep_regex::RegexMatcher> {
    RegexMatcherBuilder::new()
        .fixed_strings(true)
        .case_insensitive(true)
        .build(text)
        .map_err(|e| ToolError::InvalidParameters(format!("contains: {e}")))
}

fn search(
    cx: &RunContext,
    safe: &SafeRoot,
    globs: Option<&GlobSet>,
    contains: Option<&str>,
    max: usize,
) -> Result<Map> {
    let root = safe.path();
    let mut folders = Folders::default();
    let matcher = contains.map(matcher).transpose()?;
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .build();
    let mut out = SearchOutput {
        root: root.to_string_lossy().into_owned(),
        results: Vec::new(),
        truncated: false,
        withheld: 0,
    };
    let walker = ignore::WalkBuilder::new(root)
        .follow_links(false)
        .require_git(false)
        .hidden(true)
        .build();
    for entry in walker {
        cx.check()?;
        let Ok(entry) = entry else { continue };
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let rel: PathBuf = rel.to_path_buf();
        let Some(name) = rel.file_name().map(Path::new) else {
            continue;
        };
        // Found again beneath the held root: what the walker saw by path is not trusted (a
        // folder swapped for a symlink meanwhile is refused or holds nothing of this name),
        // so neither a result nor the withheld count can come from elsewhere.
        let Ok(folder) = folders.get(safe, rel.parent().unwrap_or(Path::new(""))) else {
            continue;
        };
        let Ok(found) = folder.entry_metadata(name) else {
            continue;
        };
        let full = folder.path().join(name);
        if cx.withheld(&full) {
            out.withheld += 1;
            continue;
        }
        if !found.is_file() {
            continue;
        }
        if globs.is_some_and(|g| !g.is_match(&rel)) {
            continue;
        }
        let mut matches = Vec::new();
        let size;
        if let Some(m) = &matcher {
            let Ok((file, meta)) = folder.open_file(name) else {
                continue;
            };
            if crate::paths::has_other_names(&meta) {
                // A hard link may be a protected file under another name: never read it here.
                out.withheld += 1;
                continue;
            }
            size = meta.len();
            let mut stop = None;
            let sink = Lossy(|line, text: &str| {
                if cx.cancel.is_cancelled() {
                    stop = Some(ToolError::Cancelled);
                    return Ok(false);
                }
                let text = text.trim_end_matches(['\r', '\n']);
                matches.push(LineMatch {
                    line,
                    text: text.chars().take(MAX_LINE_CHARS).collect(),
                });
                Ok(matches.len() < LINES_PER_FILE)
            });
            if searcher.search_file(m, &file, sink).is_err() {
                continue;
            }
            if let Some(e) = stop {
                return Err(e);
            }
            if matches.is_empty() {
                continue;
            }
        } else {
            size = found.len();
        }
        if out.results.len() >= max {
            out.truncated = true;
            break;
        }
        out.results.push(Hit {
            path: rel.to_string_lossy().into_owned(),
            size,
            matches,
        });
    }
    to_map(&out)
}

/// Folder handles beneath the searched root, opened one level at a time without following
/// symlinks; the last one is kept, since the walk yields a folder's files together.
#[derive(Default)]
struct Folders {
    last: Option<(PathBuf, SafeRoot)>,
}

impl Folders {
    fn get<'a>(&'a mut self, root: &'a SafeRoot, rel: &Path) -> Result<&'a SafeRoot> {
        if rel.as_os_str().is_empty() {
            return Ok(root);
        }
        if !matches!(&self.last, Some((p, _)) if p == rel) {
            self.last = None;
            let mut dir: Option<SafeRoot> = None;
            for comp in rel.components() {
                let std::path::Component::Normal(name) = comp else {
                    return Err(ToolError::refused(format!(
                        "{} is not below the root",
                        rel.display()
                    )));
                };
                let next = dir.as_ref().unwrap_or(root).open_subdir(Path::new(name))?;
                dir = Some(next);
            }
            self.last = dir.map(|d| (rel.to_path_buf(), d));
        }
        match &self.last {
            Some((_, d)) => Ok(d),
            None => Ok(root),
        }
    }
}
