//! The docs against the binaries (`just check-docs`): every `loader ...` and
//! `lab ...` command that README.md or docs/ shows, in a shell block or an
//! inline code span, names a subcommand and options that this build's
//! `--help` lists, every `just <recipe>` is in the justfile, and every
//! relative link points at a file that exists. Needs no root.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .into()
}

fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut files = vec![repo().join("README.md")];
    walk(&repo().join("docs"), &mut files);
    files.sort();
    files
}

/// Code the docs show as commands: each line of a shell block (with `\`
/// continuations joined), and each inline code span; with line numbers.
fn snippets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<bool> = None; // Some(is a shell block)
    let mut pending = String::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let t = line.trim_start();
        if let Some(lang) = t.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(matches!(
                    lang.trim(),
                    "" | "sh" | "console" | "bash" | "shell"
                )),
            };
            continue;
        }
        match fence {
            Some(true) => {
                let l = t.strip_prefix("$ ").unwrap_or(t);
                if let Some(cont) = l.strip_suffix('\\') {
                    pending.push_str(cont);
                    pending.push(' ');
                } else {
                    pending.push_str(l);
                    out.push((n, std::mem::take(&mut pending)));
                }
            }
            Some(false) => {}
            None => {
                for (k, span) in line.split('`').enumerate() {
                    if k % 2 == 1 {
                        out.push((n, span.to_string()));
                    }
                }
            }
        }
    }
    out
}

/// The words of a command as a user types it, without sudo, environment
/// assignments or a path to the binary; stops at a comment, pipe,
/// redirection or the next command.
fn command_words(snippet: &str) -> Vec<String> {
    let mut words: Vec<&str> = Vec::new();
    for w in snippet.split_whitespace() {
        if w.starts_with('#') || ["|", ">", ">>", "&&", ";", "||", "2>&1"].contains(&w) {
            break;
        }
        words.push(w);
    }
    let mut rest = &words[..];
    loop {
        match rest.first() {
            Some(&"sudo") | Some(&"-E") | Some(&"env") => rest = &rest[1..],
            Some(w) if w.contains('=') && !w.starts_with('-') => rest = &rest[1..],
            _ => break,
        }
    }
    rest.iter()
        .enumerate()
        .map(|(i, w)| {
            let w = if i == 0 {
                w.rsplit('/').next().unwrap()
            } else {
                w
            };
            w.trim_end_matches([',', '.', ')', ';']).to_string()
        })
        .collect()
}

/// `bin [sub] --help`, cached.
struct Helps {
    cache: HashMap<Vec<String>, Option<String>>,
}

impl Helps {
    fn get(&mut self, bin: &str, sub: Option<&str>) -> Option<&str> {
        let key: Vec<String> = std::iter::once(bin).chain(sub).map(String::from).collect();
        self.cache
            .entry(key)
            .or_insert_with(|| {
                let out = Command::new(common::workspace_bin(bin))
                    .args(sub)
                    .arg("--help")
                    .output()
                    .unwrap();
                out.status
                    .success()
                    .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
            })
            .as_deref()
    }
}

/// `--opt` as an option of a help text (not as a prefix of a longer one).
fn has_option(help: &str, opt: &str) -> bool {
    help.match_indices(opt).any(|(i, _)| {
        let after = help[i + opt.len()..].chars().next();
        !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

fn recipes() -> BTreeSet<String> {
    std::fs::read_to_string(repo().join("justfile"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_lowercase()))
        .filter_map(|l| l.split([' ', ':']).next())
        .filter(|name| !name.contains('='))
        .map(String::from)
        .collect()
}

#[test]
fn every_command_and_option_the_docs_show_exists() {
    let mut helps = Helps {
        cache: HashMap::new(),
    };
    let recipes = recipes();
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        for (line, snippet) in snippets(&text) {
            let words = command_words(&snippet);
            let Some(bin) = words.first().map(String::as_str) else {
                continue;
            };
            let at = format!("{name}:{line}: `{}`", snippet.trim());
            match bin {
                "just" => {
                    if let Some(r) = words.get(1).filter(|r| !r.starts_with('-')) {
                        checked += 1;
                        if !recipes.contains(r.as_str()) {
                            problems.push(format!("{at}: no recipe `{r}` in the justfile"));
                        }
                    }
                }
                "loader" | "lab" => {
                    // The subcommand: the first word that is neither an
                    // option nor the value of one before it (`lab --cpus 1
                    // sawtooth`: `--cpus <LIST>` in `lab --help`).
                    let top = helps.get(bin, None).unwrap_or_default().to_string();
                    let mut i = 1;
                    while let Some(w) = words.get(i).filter(|w| w.starts_with("--")) {
                        let takes_value = !w.contains('=') && top.contains(&format!("{w} <"));
                        i += if takes_value { 2 } else { 1 };
                    }
                    let placeholder =
                        |w: &str| w.starts_with('<') || w.chars().all(|c| c.is_ascii_uppercase());
                    let sub = words
                        .get(i)
                        .filter(|w| !w.starts_with('-') && !placeholder(w))
                        .map(String::as_str);
                    checked += 1;
                    let Some(help) = helps.get(bin, sub) else {
                        problems.push(format!(
                            "{at}: `{bin} {}` is not a command",
                            sub.unwrap_or("")
                        ));
                        continue;
                    };
                    let help = help.to_string();
                    for w in &words[1..] {
                        let opt = w.split('=').next().unwrap();
                        if opt.starts_with("--") && opt.len() > 2 && !has_option(&help, opt) {
                            problems.push(format!(
                                "{at}: `{bin}{}` has no option {opt}",
                                sub.map(|s| format!(" {s}")).unwrap_or_default()
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    assert!(checked > 100, "only {checked} commands found in the docs");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_relative_link_points_at_a_file() {
    let mut problems = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            for part in line.split("](").skip(1) {
                let target = part.split(')').next().unwrap();
                let path = target.split('#').next().unwrap();
                if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
                    continue;
                }
                if !file.parent().unwrap().join(path).exists() {
                    problems.push(format!(
                        "{}:{}: {target}",
                        file.strip_prefix(repo()).unwrap().display(),
                        i + 1
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "links to nothing:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_catches_what_it_should() {
    assert_eq!(
        command_words("sudo -E env PATH=\"$PATH\" target/release/lab queue --rtt 1ms | tee x"),
        ["lab", "queue", "--rtt", "1ms"]
    );
    assert_eq!(
        command_words("PREFIX=/usr just install # note"),
        ["just", "install"]
    );
    assert!(has_option("  --rtt <RTT>\n", "--rtt"));
    assert!(!has_option("  --rtt-max <RTT>\n", "--rtt"));
    let s = snippets(
        "a `lab queue` b\n```sh\nloader attach \\\n  --algo dctcp\n```\n```toml\nx = 1\n```\n",
    );
    assert_eq!(
        s,
        [
            (1, "lab queue".to_string()),
            (4, "loader attach  --algo dctcp".to_string())
        ]
    );
}
