//! Names of lab objects: `dl<pid>x<n>` then a role, e.g. `dl1f3ax2-rx`.
//! The owning pid in the name lets `lab cleanup` tell a crashed run's
//! leftovers from a lab that is still running.

use std::sync::atomic::{AtomicU32, Ordering};

const TAG: &str = "dl";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prefix(String);

impl Prefix {
    /// A prefix no other lab on this machine uses now.
    pub fn unique() -> Prefix {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Prefix(format!("{TAG}{:x}x{n:x}", std::process::id()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `<prefix>-<role>` for namespaces; `<prefix><role>` for interfaces,
    /// which the kernel limits to 15 characters.
    pub fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.0)
    }

    pub fn ifname(&self, role: &str) -> String {
        let name = format!("{}{role}", self.0);
        assert!(
            name.len() <= 15,
            "interface name {name} longer than 15 characters"
        );
        name
    }

    /// The pid that made a lab object called `name`, if it is one.
    pub fn owner(name: &str) -> Option<u32> {
        let rest = name.strip_prefix(TAG)?;
        let (pid, tail) = rest.split_once('x')?;
        let n_end = tail
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(tail.len());
        if n_end == 0 {
            return None;
        }
        u32::from_str_radix(pid, 16).ok()
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_and_owned() {
        let a = Prefix::unique();
        let b = Prefix::unique();
        assert_ne!(a, b);
        assert_eq!(Prefix::owner(&a.ns("rx")), Some(std::process::id()));
        assert_eq!(Prefix::owner(&a.ifname("s1")), Some(std::process::id()));
        assert_eq!(Prefix::owner("eth0"), None);
        assert_eq!(Prefix::owner("dlxyz"), None);
        assert_eq!(Prefix::owner("dl12x"), None);
    }
}
