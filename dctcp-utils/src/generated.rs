//! Modules over the skeletons a crate's build.rs generated
//! (`build::BpfBuild`): generated code follows C's names and keeps items
//! nobody calls, so its lints are off there and nowhere else.

/// `[pub] mod NAME` over OUT_DIR/NAME.skel.rs, the libbpf-rs skeleton.
#[macro_export]
macro_rules! skeleton {
    ($vis:vis $name:ident) => {
        $vis mod $name {
            #![allow(
                clippy::all,
                dead_code,
                non_camel_case_types,
                non_snake_case,
                unused_imports
            )]
            include!(concat!(env!("OUT_DIR"), "/", stringify!($name), ".skel.rs"));
        }
    };
}
