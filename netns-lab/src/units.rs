//! Human units on the command line and in reports.

/// Parses a rate: `100M`, `1G`, `100mbit`, `2.5Gbit`, `500k`, or bit/s.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("bit/s")
        .or_else(|| t.strip_suffix("bps"))
        .or_else(|| t.strip_suffix("bit"))
        .unwrap_or(&t);
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a rate (e.g. 100M, 1G, 250mbit)"))?;
    if v.is_nan() || v <= 0.0 {
        return Err(format!("rate `{s}` must be positive"));
    }
    Ok((v * mult).round() as u64)
}

/// `100 Mbit/s`, `1 Gbit/s`, `2.5 Gbit/s`.
pub fn fmt_rate(bps: u64) -> String {
    let (v, unit) = if bps >= 1_000_000_000 {
        (bps as f64 / 1e9, "Gbit/s")
    } else if bps >= 1_000_000 {
        (bps as f64 / 1e6, "Mbit/s")
    } else {
        (bps as f64 / 1e3, "kbit/s")
    };
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {unit}")
}

/// Short tag for file names: `100M`, `1G`.
pub fn rate_tag(bps: u64) -> String {
    fmt_rate(bps)
        .replace(" Mbit/s", "M")
        .replace(" Gbit/s", "G")
        .replace(" kbit/s", "k")
}

/// `1/8`, `0.125` or `1`: a non-negative finite number.
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let v = match s.split_once('/') {
        Some((a, b)) => {
            let (a, b): (f64, f64) = (
                a.trim()
                    .parse()
                    .map_err(|_| format!("`{s}`: not a number"))?,
                b.trim()
                    .parse()
                    .map_err(|_| format!("`{s}`: not a number"))?,
            );
            if b == 0.0 {
                return Err(format!("`{s}`: division by zero"));
            }
            a / b
        }
        None => s
            .trim()
            .parse()
            .map_err(|_| format!("`{s}`: not a number"))?,
    };
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}`: must be a finite number >= 0"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contract is "non-negative": 0 passes; below 0, infinite or
    /// unparsable does not (`just mutants` found 0 untested).
    #[test]
    fn fractions_from_zero_up() {
        assert_eq!(parse_fraction("0"), Ok(0.0));
        assert_eq!(parse_fraction("1/8"), Ok(0.125));
        assert_eq!(parse_fraction(" 0.5 "), Ok(0.5));
        assert!(parse_fraction("-0.1").is_err());
        assert!(parse_fraction("1/0").is_err());
        assert!(parse_fraction("inf").is_err());
        assert!(parse_fraction("half").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("100M"), Ok(100_000_000));
        assert_eq!(parse_rate("1G"), Ok(1_000_000_000));
        assert_eq!(parse_rate("2.5gbit"), Ok(2_500_000_000));
        assert_eq!(parse_rate("500kbit/s"), Ok(500_000));
        assert_eq!(parse_rate("12345"), Ok(12345));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-1M").is_err());
        assert_eq!(fmt_rate(100_000_000), "100 Mbit/s");
        assert_eq!(fmt_rate(2_500_000_000), "2.5 Gbit/s");
        assert_eq!(rate_tag(1_000_000_000), "1G");
    }

    #[test]
    fn small_rates_in_kbit() {
        assert_eq!(fmt_rate(500_000), "500 kbit/s");
        assert_eq!(fmt_rate(1_500), "1.5 kbit/s");
        assert_eq!(rate_tag(500_000), "500k");
    }
}
