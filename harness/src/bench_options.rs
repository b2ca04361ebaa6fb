//! The benches' options: `TIDAL_BENCH_*` environment variables, each bench reading them
//! once into an options type of its own. A value that does not parse is an error naming
//! the variable, never a silent default.

use std::str::FromStr;

/// Variable `name` parsed, `None` when unset or empty.
pub fn parsed<T: FromStr>(name: &str) -> Result<Option<T>, String> {
    parse(name, std::env::var(name).ok().as_deref())
}

/// Variable `name` parsed, or `default` when unset.
pub fn parsed_or<T: FromStr>(name: &str, default: T) -> Result<T, String> {
    Ok(parsed(name)?.unwrap_or(default))
}

/// Whether switch `name` is on: set to anything but empty, `0` or `false`.
pub fn switch(name: &str) -> bool {
    is_on(std::env::var(name).ok().as_deref())
}

/// The comma-separated items of variable `name`, or of `default` when unset.
pub fn list(name: &str, default: &str) -> Vec<String> {
    items(std::env::var(name).ok().as_deref().unwrap_or(default))
}

fn parse<T: FromStr>(name: &str, value: Option<&str>) -> Result<Option<T>, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}={text}: not a valid value")),
    }
}

fn is_on(value: Option<&str>) -> bool {
    value.is_some_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

fn items(text: &str) -> Vec<String> {
    text.split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_parses_and_anything_else_is_named() {
        assert_eq!(parse::<usize>("N", Some(" 12 ")), Ok(Some(12)));
        assert_eq!(parse::<usize>("N", None), Ok(None));
        assert_eq!(parse::<usize>("N", Some("")), Ok(None));
        assert_eq!(
            parse::<usize>("TIDAL_BENCH_OBJECTS", Some("twelve")),
            Err("TIDAL_BENCH_OBJECTS=twelve: not a valid value".to_owned())
        );
    }

    #[test]
    fn a_switch_is_off_when_unset_empty_zero_or_false() {
        for off in [None, Some(""), Some("0"), Some("false")] {
            assert!(!is_on(off), "{off:?}");
        }
        assert!(is_on(Some("1")));
        assert!(is_on(Some("yes")));
    }

    #[test]
    fn a_list_splits_on_commas() {
        assert_eq!(items("a, b,,c"), ["a", "b", "c"]);
        assert!(items("").is_empty());
    }
}
