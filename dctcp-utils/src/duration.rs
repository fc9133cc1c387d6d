//! Durations as the command lines write them: a number and its unit.

use std::time::Duration;

/// The longest duration a lab parameter takes (a round trip, a target).
pub const MAX: Duration = Duration::from_secs(1);

/// Parses a duration with its unit: `100us`, `8ms`, `2.5ms`, `1s`, `500ns`;
/// from 1 us to [`MAX`].
pub fn parse(s: &str) -> Result<Duration, String> {
    parse_up_to(s, MAX)
}

/// [`parse`] for a time within a run (a rate schedule's), up to `max`.
pub fn parse_up_to(s: &str, max: Duration) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() || c == 'µ')
        .ok_or_else(|| format!("`{s}` has no unit: write e.g. 500us, 8ms, 25ms"))?;
    let (num, unit) = t.split_at(split);
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return Err(format!("`{s}`: unit `{unit}` is not ns, us, ms or s")),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. 500us, 8ms, 25ms)"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("`{s}` must be positive"));
    }
    let d = Duration::from_secs_f64(v * scale);
    if d > max {
        return Err(format!("`{s}` is above the lab's limit of {max:?}"));
    }
    if d < Duration::from_micros(1) {
        return Err(format!("`{s}` is below the lab's resolution of 1us"));
    }
    Ok(d)
}
