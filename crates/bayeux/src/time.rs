//! The `timestamp` extension's time format: RFC 1123 in GMT, as the
//! JavaScript client's `Date.toUTCString()` writes it and CometD's
//! server-side extension sends it (`Sat, 28 Nov 2026 02:08:00 GMT`).
//! Written here rather than with a date library: one format, one function.

/// `secs` seconds after the Unix epoch, as RFC 1123 GMT text.
pub fn rfc1123(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil(days);
    format!(
        "{}, {d:02} {} {y} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Year, month (1–12) and day of `days` after 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for dates after the epoch).
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// Now, as RFC 1123 GMT text.
pub fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc1123(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_as_javascript_writes_them() {
        assert_eq!(rfc1123(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(rfc1123(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(rfc1123(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(rfc1123(1_795_831_680), "Sat, 28 Nov 2026 02:08:00 GMT");
        assert!(now().ends_with(" GMT"));
    }
}
