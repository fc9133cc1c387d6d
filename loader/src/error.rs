//! Errors the user can fix by changing the command line: reported with exit
//! status 2, everything else with 1.

use std::fmt;

#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `bail!` for bad input: returns a [`UsageError`] from the current function.
#[macro_export]
macro_rules! usage_bail {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::error::UsageError(format!($($arg)*))))
    };
}
