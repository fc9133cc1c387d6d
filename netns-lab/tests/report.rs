//! Results as people read them: a run's index.html and `lab compare`'s page
//! rendered by a real browser (Debian's Chromium, headless; setup.sh
//! installs it). The page's text holds the summary's figures, every plot of
//! the folder is on it and draws data, and the screenshots stay in
//! target/tmp/report/ (index.png beside each page).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// Chromium, or a failure that says how to get it.
fn chromium() -> PathBuf {
    ["chromium", "chromium-browser"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            })
        })
        .expect("no chromium on PATH: ./setup.sh installs Debian's")
}

/// Chromium headless on `page` with `extra` flags, its stdout.
fn browse(page: &Path, extra: &[&str]) -> String {
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let o = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-extensions",
            // Nothing leaves the machine: a page that asked for the network
            // would show it here as a blank.
            "--host-resolver-rules=MAP * ~NOTFOUND",
        ])
        .args(extra)
        .arg(url)
        .output()
        .expect("running chromium");
    assert!(o.status.success(), "chromium {extra:?}: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The page as the browser built it (its DOM), and a screenshot of it in
/// `index.png` beside it.
fn render(page: &Path) -> String {
    let shot = page.with_file_name("index.png");
    browse(
        page,
        &[
            "--window-size=1280,2400",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    let (w, h, px) = decode(&shot);
    let ink = px.chunks(3).filter(|p| p.iter().any(|&c| c < 200)).count();
    assert!(
        ink * 100 > w * h,
        "{}: {ink} dark pixels of {w}x{h}: blank",
        shot.display()
    );
    browse(page, &["--dump-dom"])
}

/// A PNG's width, height and RGB pixels.
fn decode(path: &Path) -> (usize, usize, Vec<u8>) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut png = png::Decoder::new(std::io::BufReader::new(file));
    png.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = png.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let rgb = buf[..info.buffer_size()]
        .chunks(channels)
        .flat_map(|p| match channels {
            1 | 2 => [p[0], p[0], p[0]],
            _ => [p[0], p[1], p[2]],
        })
        .collect();
    (info.width as usize, info.height as usize, rgb)
}

/// The text of a DOM: tags out, entities back, whitespace as one space.
fn text_of(dom: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in dom.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    let out = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Each table cell of a summary.md, as a reader sees it (markdown's `**`
/// and backticks are markup).
fn cells(md: &str) -> Vec<String> {
    md.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| ---"))
        .flat_map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .map(|c| {
            c.replace("**", "")
                .replace('`', "")
                .replace("\\|", "|")
                .trim()
                .to_string()
        })
        .filter(|c| !c.is_empty())
        .collect()
}

/// Every plot the page holds draws its data: each `<svg>` of the DOM,
/// rendered alone at its own size, has more of its series' colours on it
/// than its legend's swatches make (a legend entry is at most 113 pixels:
/// a 6-pixel disc; lines 72), not only the black and grey of its axes.
fn assert_plots_drawn(dir: &Path, dom: &str) {
    let svgs: Vec<&str> = dom
        .match_indices("<svg")
        .map(|(i, _)| &dom[i..i + dom[i..].find("</svg>").expect("svg closed") + 6])
        .collect();
    let files = svg_files(dir);
    assert_eq!(svgs.len(), files, "plots on the page against SVGs in {}", dir.display());
    let size = |svg: &str, attr: &str| -> usize {
        let tag = &svg[..svg.find('>').unwrap()];
        let at = tag.find(&format!(" {attr}=\"")).unwrap_or_else(|| panic!("no {attr} in {tag}"));
        let v = &tag[at + attr.len() + 3..];
        v[..v.find('"').unwrap()].parse().unwrap()
    };
    let width = svgs.iter().map(|s| size(s, "width")).max().unwrap_or(1);
    let heights: Vec<usize> = svgs.iter().map(|s| size(s, "height")).collect();
    let tiles: String = svgs.iter().map(|s| format!("<div style=\"display:block;line-height:0\">{s}</div>")).collect();
    let page = dir.join("plots-test.html");
    std::fs::write(
        &page,
        format!("<!DOCTYPE html><html><body style=\"margin:0;background:#fff\">{tiles}</body></html>"),
    )
    .unwrap();
    let shot = dir.join("plots-test.png");
    browse(
        &page,
        &[
            &format!("--window-size={width},{}", heights.iter().sum::<usize>()),
            &format!("--screenshot={}", shot.display()),
        ],
    );
    let (w, _, px) = decode(&shot);
    let mut top = 0;
    for (i, h) in heights.iter().enumerate() {
        let coloured = (top..top + h)
            .flat_map(|y| (0..w).map(move |x| (y * w + x) * 3))
            .filter(|&o| o + 2 < px.len())
            .filter(|&o| {
                let p = &px[o..o + 3];
                p.iter().max().unwrap() - p.iter().min().unwrap() > 60
            })
            .count();
        assert!(
            coloured > 400,
            "plot {i} of {}: {coloured} pixels of its series' colours: it drew nothing but its legend",
            dir.display()
        );
        top += h;
    }
    let _ = std::fs::remove_file(page);
    let _ = std::fs::remove_file(shot);
}

fn svg_files(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            n += svg_files(&p);
        } else if p.extension().is_some_and(|x| x == "svg") {
            n += 1;
        }
    }
    n
}

fn shots_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Two `lab queue` runs (K = 20 and K = 30), each page and the page that
/// compares them, as Chromium renders them.
#[test]
fn the_pages_show_the_summarys_figures_and_every_plot_in_a_browser() {
    require_root();
    let _serial = serial();
    let shots = shots_dir();
    let variants = "bpf_dctcp:bpf-step,cubic:droptail";
    let (a, b) = (shots.join("k20"), shots.join("k30"));
    for (out, k) in [(&a, "20"), (&b, "30")] {
        let o = run_quick_queue(out, variants, &["--k", k]);
        assert!(o.status.success(), "lab queue --k {k}: {}", stderr(&o));
        assert_results(out, &["runs.csv", "lab.json"]);
    }
    for run in [&a, &b] {
        let dom = render(&run.join("index.html"));
        let text = text_of(&dom);
        let summary = std::fs::read_to_string(run.join("summary.md")).unwrap();
        let missing: Vec<String> = cells(&summary)
            .into_iter()
            .filter(|c| !text.contains(c.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "{}: cells of summary.md not on the page: {missing:?}",
            run.display()
        );
        assert!(!dom.contains("<script"), "the page runs no script");
        assert_plots_drawn(run, &dom);
    }
    let page = shots.join("compare");
    let o = lab(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--out",
        page.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "lab compare: {}", stderr(&o));
    let dom = render(&page.join("index.html"));
    let text = text_of(&dom);
    // What differs (K) and the figures of both runs side by side.
    assert!(text.contains("k 20 30"), "no K of each run in {text}");
    for run in [&a, &b] {
        let runs_csv = std::fs::read_to_string(run.join("runs.csv")).unwrap();
        let mean = runs_csv.lines().nth(1).unwrap().split(',').nth(2).unwrap();
        assert!(
            text.contains(mean),
            "{}'s mean queue {mean} not on the page",
            run.display()
        );
    }
    assert_plots_drawn(&page, &dom);
    eprintln!("screenshots: {}/*/index.png", shots.display());
}

/// `lab compare` refuses what it cannot compare, exit 2, and writes nothing.
#[test]
fn compare_refuses_what_is_no_pair_of_runs() {
    let root = tmpdir("compare-bad");
    let run = |name: &str, experiment: &str| {
        let d = root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("lab.json"),
            format!("{{\"experiment\":\"{experiment}\",\"command\":\"lab {experiment}\",\"started\":\"20261205-120000\"}}"),
        )
        .unwrap();
        d
    };
    let (q1, q2, k) = (run("q1", "queue"), run("q2", "queue"), run("k", "ksweep"));
    let empty = root.join("empty");
    let plain = root.join("plain");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::write(plain.join("notes.txt"), "not a run").unwrap();
    let out = root.join("page");
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    for (args, says) in [
        (vec![s(&q1)], "give two runs or more"),
        (
            vec![s(&q1), s(&empty)],
            "is empty: not a results folder of lab",
        ),
        (
            vec![s(&q1), s(&plain)],
            "not a results folder of lab (no lab.json",
        ),
        (vec![s(&q1), s(&root.join("none"))], "no such folder"),
        (vec![s(&q1), s(&q2), s(&k)], "is a run of `lab queue`"),
    ] {
        let mut argv = vec!["compare".to_string()];
        argv.extend(args);
        argv.extend(["--out".to_string(), s(&out)]);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let o = lab(&argv);
        assert_eq!(o.status.code(), Some(2), "lab {argv:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(says),
            "lab {argv:?}: expected `{says}` in {}",
            stderr(&o)
        );
        assert!(!out.exists(), "lab {argv:?} wrote {}", out.display());
    }
    std::fs::remove_dir_all(&root).unwrap();
}
