//! The build.rs of every crate with BPF in it, in two calls: compile each
//! object into a libbpf-rs skeleton, then run bindgen over the crate's
//! interface header (the one place its structs shared with Rust are
//! declared). Warnings are errors, and cargo rebuilds when any source or
//! header the crate names changes.

use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// Where a build script is: the crate's manifest folder and OUT_DIR.
pub struct BpfBuild {
    pub manifest: PathBuf,
    pub out: PathBuf,
    /// `-I` folders for clang: the repository's `bpf/` (vmlinux.h and the
    /// algorithms' headers) and the crate's own `src/bpf/`.
    include: Vec<PathBuf>,
}

impl BpfBuild {
    /// Reads cargo's environment. The repository's `bpf/` is on the include
    /// path, then `extra` (relative to the crate).
    pub fn new(extra: &[&str]) -> Self {
        let var = |k: &str| PathBuf::from(std::env::var_os(k).unwrap_or_else(|| panic!("{k}")));
        let manifest = var("CARGO_MANIFEST_DIR");
        let mut include = vec![manifest.join("..").join("bpf")];
        include.extend(extra.iter().map(|e| manifest.join(e)));
        BpfBuild {
            out: var("OUT_DIR"),
            manifest,
            include,
        }
    }

    /// `src` (relative to the crate) into OUT_DIR/`name`.bpf.o and
    /// OUT_DIR/`name`.skel.rs.
    pub fn skeleton(&self, src: &str, name: &str) -> &Self {
        let src = self.manifest.join(src);
        let mut args: Vec<&std::ffi::OsStr> = vec!["-Wall".as_ref(), "-Werror".as_ref()];
        for dir in &self.include {
            args.extend(["-I".as_ref(), dir.as_os_str()]);
        }
        SkeletonBuilder::new()
            .source(&src)
            .obj(self.out.join(format!("{name}.bpf.o")))
            .clang_args(args)
            .build_and_generate(self.out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
        rerun_if_changed(&src);
        self
    }

    /// bindgen over `header` (relative to the crate) into OUT_DIR/intf.rs,
    /// the types and constants matching the two regexes.
    pub fn bindings(&self, header: &str, types: &str, vars: &str) -> &Self {
        let header = self.manifest.join(header);
        let mut b = bindgen::Builder::default()
            .header(header.to_string_lossy())
            .clang_args(self.include.iter().map(|d| format!("-I{}", d.display())))
            .allowlist_type(types)
            .derive_default(true);
        if !vars.is_empty() {
            b = b.allowlist_var(vars);
        }
        b.generate()
            .unwrap_or_else(|e| panic!("bindgen over {}: {e}", header.display()))
            .write_to_file(self.out.join("intf.rs"))
            .expect("writing intf.rs");
        rerun_if_changed(&header);
        self
    }

    /// Rebuild when anything in `dir` (relative to the crate) changes: the
    /// headers a source includes.
    pub fn watch(&self, dir: &str) -> &Self {
        let dir = self.manifest.join(dir);
        rerun_if_changed(&dir);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            rerun_if_changed(&entry.expect("dir entry").path());
        }
        self
    }
}

fn rerun_if_changed(p: &Path) {
    println!("cargo:rerun-if-changed={}", p.display());
}
