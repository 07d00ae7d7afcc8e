//! Slugs and sort paths of the one-document-per-comment strategy.
//!
//! - A **slug part** is 8 lowercase hex digits, random, unique within the discussion (a unique
//!   index enforces it; a collision is retried with another).
//! - A comment's **slug** is its ancestors' slug parts and its own, joined by `/`: the direct
//!   link, as in the seed (`34db09aa/8bda1f00`).
//! - A **step** is `<posted>:<slug part>`, with `posted` written at fixed width to the
//!   microsecond, `2012.02.08.12.21.08.123456` (the seed's format plus the fraction). Fixed
//!   width makes string order time order. The microseconds come from a clock that never repeats
//!   a value within a process, so one process's comments sort in posting order; between
//!   processes the slug part breaks ties, the same way every time.
//! - The **full slug** is the steps of the path joined by `/`. Sorting by it gives the threaded
//!   order: each comment, then its replies in posting order, depth first. A sub-thread is the
//!   range `[full_slug, full_slug + "0")` (`/` sorts just before `0`), an anchored prefix that
//!   uses the index as a range scan.
//! - The **newest-first key** is the full slug with the top-level step's digits complemented
//!   (`9 - d`, `f - d`), so ascending order on it puts the newest thread first while replies keep
//!   their posting order.

use std::hash::{BuildHasher, Hasher};

use super::validate::invalid_link;
use crate::Result;

/// Hex digits in a slug part.
pub(super) const PART_LEN: usize = 8;
/// Bytes of one step: 26 of time, `:`, the slug part.
pub(super) const STEP_LEN: usize = 26 + 1 + PART_LEN;

/// Microseconds since the epoch, strictly increasing within the process (a clock that stalls or
/// steps back yields the last value plus one).
pub(super) fn now_micros() -> i64 {
    static LAST: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_micros() as i64);
    let previous = LAST
        .fetch_update(
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
            |last| Some(clock.max(last + 1)),
        )
        .unwrap_or_else(|last| last);
    clock.max(previous + 1)
}

/// A fresh random slug part.
pub(super) fn new_part() -> String {
    // `RandomState` is seeded randomly per instance; hashing a fresh ObjectId through it gives
    // well-spread bits without another dependency.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write(&bson::oid::ObjectId::new().bytes());
    format!("{:08x}", hasher.finish() as u32)
}

/// The step for a comment posted at `micros` (from [`now_micros`]) with slug part `part`.
pub(super) fn step(micros: i64, part: &str) -> String {
    format!("{}:{part}", fixed_width_time(micros))
}

/// `step` with every digit complemented, so ascending order on it is newest first. Applying it
/// twice gives `step` back.
pub(super) fn reversed_step(step: &str) -> String {
    let (time, part) = step.split_once(':').unwrap_or((step, ""));
    let time: String = time
        .chars()
        .map(|c| {
            c.to_digit(10)
                .and_then(|d| char::from_digit(9 - d, 10))
                .unwrap_or(c)
        })
        .collect();
    format!("{time}:{}", complement_hex(part))
}

fn complement_hex(part: &str) -> String {
    part.chars()
        .map(|c| {
            c.to_digit(16)
                .and_then(|d| char::from_digit(15 - d, 16))
                .unwrap_or(c)
        })
        .collect()
}

/// Microseconds since the epoch as `YYYY.MM.DD.hh.mm.ss.ffffff` (UTC), clamped to years
/// 0000-9999 so the width never changes.
fn fixed_width_time(micros: i64) -> String {
    const MAX: i64 = 253_402_300_799_999_999; // 9999-12-31T23:59:59.999999Z
    const MIN: i64 = -62_167_219_200_000_000; // 0000-01-01T00:00:00.000000Z
    const DAY: i64 = 86_400_000_000;
    let micros = micros.clamp(MIN, MAX);
    let (year, month, day) = civil_from_days(micros.div_euclid(DAY));
    let in_day = micros.rem_euclid(DAY);
    let seconds = in_day / 1_000_000;
    format!(
        "{year:04}.{month:02}.{day:02}.{:02}.{:02}.{:02}.{:06}",
        seconds / 3_600,
        seconds / 60 % 60,
        seconds % 60,
        in_day % 1_000_000
    )
}

/// The time of a step written by [`step`], in microseconds since the epoch.
pub(super) fn step_micros(step: &str) -> Option<i64> {
    let time = step.get(..26)?;
    let field = |range: std::ops::Range<usize>| time.get(range)?.parse::<i64>().ok();
    let days = days_from_civil(field(0..4)?, field(5..7)?, field(8..10)?);
    let seconds = field(11..13)? * 3_600 + field(14..16)? * 60 + field(17..19)?;
    Some((days * 86_400 + seconds) * 1_000_000 + field(20..26)?)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Checks a slug path (`part/part/...`) and returns its parts.
pub(super) fn parse_slug(link: &str) -> Result<Vec<&str>> {
    if link.is_empty() {
        return Err(invalid_link(link, "empty"));
    }
    let parts: Vec<&str> = link.split('/').collect();
    for part in &parts {
        if part.len() != PART_LEN
            || !part
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(invalid_link(
                link,
                "each step of a slug is 8 lowercase hex digits, steps joined by `/`",
            ));
        }
    }
    Ok(parts)
}

/// Whether `key` has the shape of a full slug or newest-first key (steps joined by `/`).
pub(super) fn is_sort_key(key: &str) -> bool {
    !key.is_empty()
        && key.split('/').all(|step| {
            step.len() == STEP_LEN
                && step.bytes().enumerate().all(|(i, b)| match i {
                    4 | 7 | 10 | 13 | 16 | 19 => b == b'.',
                    26 => b == b':',
                    0..=25 => b.is_ascii_digit(),
                    _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_have_fixed_width_and_sort_by_time() {
        let at = |us| step(us, "0000abcd");
        assert_eq!(
            at(1_328_703_668_123_456),
            "2012.02.08.12.21.08.123456:0000abcd"
        );
        assert_eq!(at(0), "1970.01.01.00.00.00.000000:0000abcd");
        let times = [
            0,
            1,
            999_999,
            1_000_000,
            59_999_999,
            86_399_999_999,
            1_328_703_668_123_456,
        ];
        let steps: Vec<String> = times.iter().map(|&us| at(us)).collect();
        for (step, &us) in steps.iter().zip(&times) {
            assert_eq!(step_micros(step), Some(us), "{step}");
        }
        assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
        assert!(steps.iter().all(|s| s.len() == STEP_LEN && is_sort_key(s)));
    }

    #[test]
    fn reversed_steps_sort_newest_first() {
        let a = step(1_000, "0000000a");
        let b = step(2_000, "00000001");
        let c = step(2_000, "00000002");
        let (ra, rb, rc) = (reversed_step(&a), reversed_step(&b), reversed_step(&c));
        assert!(a < b && b < c);
        assert!(rc < rb && rb < ra, "{ra} {rb} {rc}");
        assert!(is_sort_key(&ra));
        assert_eq!(reversed_step(&ra), a);
    }

    #[test]
    fn the_clock_never_repeats() {
        let times: Vec<i64> = (0..10_000).map(|_| now_micros()).collect();
        assert!(times.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn slug_parts_are_random_hex() {
        let parts: std::collections::HashSet<String> = (0..1000).map(|_| new_part()).collect();
        assert_eq!(parts.len(), 1000);
        assert!(parts.iter().all(|p| parse_slug(p).is_ok()));
        assert!(parse_slug("0123abcd/89abcdef").is_ok());
        for bad in [
            "",
            "0123abc",
            "0123ABCD",
            "0123abcd/",
            "/0123abcd",
            "0123abcg",
        ] {
            assert!(parse_slug(bad).is_err(), "{bad}");
        }
    }
}
