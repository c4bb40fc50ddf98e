//! Minimal command-line parsing: `--flag value`, `-f value`, boolean switches, positionals.

use std::collections::HashMap;

pub struct Args {
    values: HashMap<String, String>,
    switches: Vec<String>,
    pub positional: Vec<String>,
}

impl Args {
    /// `with_value` lists the options that take a value (both spellings, e.g. "-m", "--model").
    pub fn parse(raw: &[String], with_value: &[&str], switches: &[&str]) -> Result<Args, String> {
        let mut args = Args {
            values: HashMap::new(),
            switches: Vec::new(),
            positional: Vec::new(),
        };
        let mut it = raw.iter();
        while let Some(a) = it.next() {
            if with_value.contains(&a.as_str()) {
                let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
                args.values.insert(a.clone(), v.clone());
            } else if switches.contains(&a.as_str()) {
                args.switches.push(a.clone());
            } else if a.starts_with('-') && a.len() > 1 && a.parse::<f64>().is_err() {
                return Err(format!("unknown option {a}"));
            } else {
                args.positional.push(a.clone());
            }
        }
        Ok(args)
    }

    /// The value of the first of `names` given.
    pub fn get(&self, names: &[&str]) -> Option<&str> {
        names
            .iter()
            .find_map(|n| self.values.get(*n))
            .map(String::as_str)
    }

    pub fn require(&self, names: &[&str]) -> Result<&str, String> {
        self.get(names)
            .ok_or_else(|| format!("missing required option {}", names.join("/")))
    }

    pub fn parse_or<T: std::str::FromStr>(&self, names: &[&str], default: T) -> Result<T, String> {
        match self.get(names) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("bad value {v:?} for {}", names.join("/"))),
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.switches.iter().any(|s| s == name)
    }
}
