//! Go's `time.ParseDuration`, for `@every <duration>`: robfig/cron accepts exactly what Go
//! accepts, so this follows Go's grammar, overflow rules and rounding to the nanosecond.

/// Nanoseconds in one unit, by Go's unit names.
const UNITS: [(&str, u64); 9] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("", 0),
];

const LIMIT: u64 = 1 << 63;

/// Parses `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` into signed nanoseconds, or says why not.
///
/// Longer than most functions here on purpose: it follows Go's `time.ParseDuration`
/// step by step (same overflow checks, same error cases), so that the two can be
/// compared side by side; the differential test holds it to Go's results.
pub fn parse_go_duration(text: &str) -> Result<i64, &'static str> {
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err("not a duration");
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let first = rest.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err("not a duration");
        }
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut whole: u64 = 0;
        for digit in rest[..int_len].bytes() {
            if whole > LIMIT / 10 {
                return Err("overflows");
            }
            whole = whole * 10 + u64::from(digit - b'0');
            if whole > LIMIT {
                return Err("overflows");
            }
        }
        rest = &rest[int_len..];
        let (mut fraction, mut scale, mut frac_len) = (0u64, 1f64, 0usize);
        let has_point = rest.starts_with('.');
        if has_point {
            rest = &rest[1..];
            frac_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflow = false;
            for digit in rest[..frac_len].bytes() {
                if overflow {
                    continue;
                }
                if fraction > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                fraction = fraction * 10 + u64::from(digit - b'0');
                scale *= 10.0;
            }
            rest = &rest[frac_len..];
        }
        if int_len == 0 && frac_len == 0 {
            return Err("not a duration");
        }
        let unit_len = rest
            .bytes()
            .take_while(|b| !(*b == b'.' || b.is_ascii_digit()))
            .count();
        if unit_len == 0 {
            return Err("missing unit (ns, us, ms, s, m, h)");
        }
        let unit_name = &rest[..unit_len];
        rest = &rest[unit_len..];
        let unit = UNITS
            .iter()
            .find(|(name, _)| !name.is_empty() && *name == unit_name)
            .map(|(_, nanos)| *nanos)
            .ok_or("unknown unit (use ns, us, ms, s, m or h)")?;
        if whole > LIMIT / unit {
            return Err("overflows");
        }
        let mut value = whole * unit;
        if fraction > 0 {
            // Go computes this in float64 and truncates; so do we.
            value += (fraction as f64 * (unit as f64 / scale)) as u64;
            if value > LIMIT {
                return Err("overflows");
            }
        }
        total += value;
        if total > LIMIT {
            return Err("overflows");
        }
    }
    if negative {
        // total <= 2^63, so the negation fits (2^63 itself is i64::MIN).
        return Ok((total as i128).wrapping_neg() as i64);
    }
    i64::try_from(total).map_err(|_| "overflows")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_does() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("5s", 5_000_000_000),
            ("1h30m", 5_400_000_000_000),
            ("1.5h", 5_400_000_000_000),
            (".5s", 500_000_000),
            ("2.s", 2_000_000_000),
            ("-3m", -180_000_000_000),
            ("+10ms", 10_000_000),
            ("1h0m0.25s", 3_600_250_000_000),
            ("3\u{b5}s", 3_000),
            ("2562047h47m16.854775807s", i64::MAX),
            ("-2562047h47m16.854775808s", i64::MIN),
        ];
        for (text, nanos) in cases {
            assert_eq!(parse_go_duration(text), Ok(*nanos), "{text}");
        }
    }

    #[test]
    fn malformed_durations_are_rejected() {
        for text in [
            "",
            "-",
            "s",
            "5",
            "1.5",
            ".s",
            "5 s",
            "5x",
            "1d",
            "3000000h",
            "--5s",
            " 5s",
            "2562047h47m16.854775808s",
        ] {
            assert!(
                parse_go_duration(text).is_err(),
                "{text:?} should be rejected"
            );
        }
    }
}
