//! `strftime_now(format)`: newer templates (Llama 3.x, Granite) print today's date.

use std::time::{SystemTime, UNIX_EPOCH};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Formats the current UTC time (see [`format_utc`] for the directives; others are kept).
pub(super) fn strftime_now(format: String) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs, &format)
}

/// `strftime`-style formatting of a Unix time in UTC: %Y %y %m %d %e %j %B %b %A %a %H %I %p
/// %M %S %F %T %Z %z %%, and glibc's `%-d` style unpadded numbers.
pub fn format_utc(unix_secs: u64, format: &str) -> String {
    let days = (unix_secs / 86_400) as i64;
    let (year, month, day) = civil_from_days(days);
    let sod = unix_secs % 86_400;
    let (hour, minute, second) = (sod / 3600, sod / 60 % 60, sod % 60);
    let hour12 = (hour + 11) % 12 + 1;
    // 1970-01-01 was a Thursday.
    let weekday = WEEKDAYS[(days + 3).rem_euclid(7) as usize];
    let yday = day_of_year(year, month, day);
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        // glibc's `%-d`: the number without its padding.
        let unpadded = chars.peek() == Some(&'-');
        if unpadded {
            chars.next();
        }
        let num = |n: u64, width: usize| {
            if unpadded {
                n.to_string()
            } else {
                format!("{n:0width$}")
            }
        };
        match chars.next() {
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&num(year.rem_euclid(100) as u64, 2)),
            Some('m') => out.push_str(&num(month.into(), 2)),
            Some('d') => out.push_str(&num(day.into(), 2)),
            Some('e') => out.push_str(&format!("{day:2}")),
            Some('j') => out.push_str(&num(yday.into(), 3)),
            Some('B') => out.push_str(MONTHS[month as usize - 1]),
            Some('b') | Some('h') => out.push_str(&MONTHS[month as usize - 1][..3]),
            Some('A') => out.push_str(weekday),
            Some('a') => out.push_str(&weekday[..3]),
            Some('H') => out.push_str(&num(hour, 2)),
            Some('I') => out.push_str(&num(hour12, 2)),
            Some('p') => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            Some('M') => out.push_str(&num(minute, 2)),
            Some('S') => out.push_str(&num(second, 2)),
            Some('F') => out.push_str(&format!("{year}-{month:02}-{day:02}")),
            Some('T') => out.push_str(&format!("{hour:02}:{minute:02}:{second:02}")),
            Some('Z') => out.push_str("UTC"),
            Some('z') => out.push_str("+0000"),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                if unpadded {
                    out.push('-');
                }
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// 1-based day of the year.
fn day_of_year(year: i64, month: u32, day: u32) -> u32 {
    const BEFORE: [u32; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    BEFORE[month as usize - 1] + day + u32::from(leap && month > 2)
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31) in the proleptic Gregorian calendar
/// (the era-based algorithm: 400-year eras of 146097 days).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
