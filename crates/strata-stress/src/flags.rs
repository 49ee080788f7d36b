//! Command-line flags in db_stress's style: `--name=value` or
//! `--name value`. Unknown flags are errors, so a typo never silently runs
//! a different test.

use std::collections::BTreeMap;
use std::str::FromStr;

/// Parsed flags; each getter names the flag and its default.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    values: BTreeMap<String, String>,
}

impl Flags {
    /// Parses `args`, accepting only names in `known`.
    pub fn parse(args: &[String], known: &[&str]) -> Result<Flags, String> {
        let mut values = BTreeMap::new();
        let mut it = args.iter();
        // Each pass consumes one or two arguments.
        while let Some(arg) = it.next() {
            let Some(body) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument {arg:?}"));
            };
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n.to_string(), v.to_string()),
                None => {
                    let v = it.next().ok_or_else(|| format!("--{body} needs a value"))?;
                    (body.to_string(), v.clone())
                }
            };
            if !known.contains(&name.as_str()) {
                return Err(format!(
                    "unknown flag --{name} (known: {})",
                    known.join(", ")
                ));
            }
            values.insert(name, value);
        }
        Ok(Flags { values })
    }

    /// The value of `--name`, or `default`.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name}={v}: not a valid value")),
        }
    }

    /// The value of `--name` as a boolean (`1`/`0`/`true`/`false`).
    pub fn flag(&self, name: &str, default: bool) -> Result<bool, String> {
        match self.values.get(name).map(String::as_str) {
            None => Ok(default),
            Some("1" | "true") => Ok(true),
            Some("0" | "false") => Ok(false),
            Some(v) => Err(format!("--{name}={v}: expected 0 or 1")),
        }
    }

    /// The value of `--name`, which must be given.
    pub fn required(&self, name: &str) -> Result<String, String> {
        self.values
            .get(name)
            .cloned()
            .ok_or_else(|| format!("--{name} is required"))
    }

    /// Every flag given, as `--name=value` arguments (to pass on to a child).
    pub fn to_args(&self) -> Vec<String> {
        self.values
            .iter()
            .map(|(n, v)| format!("--{n}={v}"))
            .collect()
    }

    /// Sets or replaces `--name`.
    pub fn set(&mut self, name: &str, value: impl ToString) {
        self.values.insert(name.to_string(), value.to_string());
    }

    /// Removes `--name`.
    pub fn remove(&mut self, name: &str) {
        self.values.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms_and_rejects_unknown() {
        let args: Vec<String> = ["--threads=4", "--keys", "100", "--sync=1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let f = Flags::parse(&args, &["threads", "keys", "sync"]).unwrap();
        assert_eq!(f.get("threads", 1u32), Ok(4));
        assert_eq!(f.get("keys", 1u32), Ok(100));
        assert_eq!(f.flag("sync", false), Ok(true));
        assert_eq!(f.get("missing", 7u32), Ok(7));
        assert!(Flags::parse(&["--nope=1".to_string()], &["threads"]).is_err());
        assert!(Flags::parse(&["--keys".to_string()], &["keys"]).is_err());
    }
}
