//! The demo page at `/`, the poker table at `/table.html`, the game
//! modules' page at `/games.html`, and the synthetic stream the demo shows.
//!
//! The pages (`web/src/index.html`, `table.html`, `games.html` and
//! `demo.css` as written, and the scripts bundled into the committed
//! `web/dist/demo.js`, `table.js` and `games.js`) are embedded in the binary
//! with `include_bytes!`, so `herald serve` needs no files beside it and
//! building the server needs no Node toolchain. All use the TypeScript SDK:
//! the demo shows a live table and chart of `demo.stream`, a chat room on
//! `demo.chat` and the transport in use; the poker page shows the game lobby
//! and lets a person sit at a Hold'em table, play and chat on `table:{id}`;
//! the games page does the same for one scripted game (`?game=NAME`, a
//! `[[games]]` entry), drawn by a renderer for Liar's Dice, Snake or RPS, or
//! as JSON for any other.
//!
//! Herald has no event source of its own, so `--demo-rate N` (off by default:
//! a production server should not publish anything it was not asked to)
//! starts one task that publishes N rows a second to `demo.stream` through the
//! broker, exactly as `POST /api/publish` would: the car-sharing rows of seed
//! 002 (a fleet of cars reporting position, speed and fuel), as JSON objects.

use crate::respond::{full, Body};
use herald_core::{Completion, Node};
use http::{Response, StatusCode};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

/// The channel the synthetic stream publishes to.
pub const STREAM_CHANNEL: &str = "demo.stream";

const INDEX_HTML: &[u8] = include_bytes!("../../../web/src/index.html");
const DEMO_JS: &[u8] = include_bytes!("../../../web/dist/demo.js");
const DEMO_CSS: &[u8] = include_bytes!("../../../web/src/demo.css");
const TABLE_HTML: &[u8] = include_bytes!("../../../web/src/table.html");
const TABLE_JS: &[u8] = include_bytes!("../../../web/dist/table.js");
const GAMES_HTML: &[u8] = include_bytes!("../../../web/src/games.html");
const GAMES_JS: &[u8] = include_bytes!("../../../web/dist/games.js");

/// The embedded file at `path`, if there is one.
pub fn asset(path: &str) -> Option<Response<Body>> {
    let (body, kind): (&'static [u8], &'static str) = match path {
        "/" | "/index.html" => (INDEX_HTML, "text/html; charset=utf-8"),
        "/demo.js" => (DEMO_JS, "text/javascript; charset=utf-8"),
        "/demo.css" => (DEMO_CSS, "text/css; charset=utf-8"),
        "/table.html" => (TABLE_HTML, "text/html; charset=utf-8"),
        "/table.js" => (TABLE_JS, "text/javascript; charset=utf-8"),
        "/games.html" => (GAMES_HTML, "text/html; charset=utf-8"),
        "/games.js" => (GAMES_JS, "text/javascript; charset=utf-8"),
        _ => return None,
    };
    let mut r = Response::new(full(body));
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(kind),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    Some(r)
}

/// One car of the synthetic fleet.
#[derive(Debug, Clone)]
struct Car {
    id: u32,
    lon: f64,
    lat: f64,
    speed: f64,
    gas: f64,
}

/// A small xorshift generator: the stream needs variety, not quality.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// Generates seed 002's car-sharing rows.
#[derive(Debug)]
struct Fleet {
    cars: Vec<Car>,
    rng: Rng,
    seq: u64,
}

impl Fleet {
    fn new(seed: u64) -> Fleet {
        let mut rng = Rng(seed | 1);
        let cars = (0..10)
            .map(|i| Car {
                id: 70 + i,
                lon: 116.4 + rng.unit() * 0.5,
                lat: 39.9 + rng.unit() * 0.5,
                speed: 60.0 + rng.unit() * 40.0,
                gas: 50.0 + rng.unit() * 40.0,
            })
            .collect();
        Fleet { cars, rng, seq: 0 }
    }

    /// The next row, as JSON text, stamped with `now` (ms since the epoch).
    fn row(&mut self, now_ms: u64) -> String {
        self.seq += 1;
        let n = self.cars.len();
        let pick = (self.rng.next() % n as u64) as usize;
        let (d_lon, d_lat, d_speed, d_gas) = (
            self.rng.unit(),
            self.rng.unit(),
            self.rng.unit(),
            self.rng.unit(),
        );
        let car = &mut self.cars[pick];
        car.lon += d_lon * 0.001;
        car.lat += d_lat * 0.001;
        car.speed = (car.speed + d_speed * 12.0).clamp(0.0, 180.0);
        car.gas -= d_gas.abs() * 0.2;
        if car.gas < 5.0 {
            car.gas = 100.0;
        }
        let mut s = String::with_capacity(160);
        let _ = write!(
            s,
            r#"{{"seq":{},"time":"{}","car":"c{:05}","lon":{:.6},"lat":{:.6},"speed":{},"gas":{:.2}}}"#,
            self.seq,
            rfc3339_ms(now_ms),
            car.id,
            car.lon,
            car.lat,
            car.speed.round() as u32,
            car.gas
        );
        s
    }
}

/// `2022-03-29T20:35:56.581Z` for milliseconds since the Unix epoch
/// (Howard Hinnant's civil-from-days).
fn rfc3339_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Publishes `rate` rows a second to [`STREAM_CHANNEL`] until `shutdown`.
pub async fn stream(node: Arc<Node>, rate: u32, shutdown: CancellationToken) {
    if rate == 0 {
        return;
    }
    let mut fleet = Fleet::new(now_ms());
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let row = fleet.row(now_ms());
        let result = match node.broker.publish(STREAM_CHANNEL, row.into()) {
            Completion::Ready(r) => r,
            Completion::Pending(f) => f.await,
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "demo stream: publish failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_json_objects_of_seed_002s_columns() {
        let mut fleet = Fleet::new(42);
        for i in 1..=500u64 {
            let row = fleet.row(1_648_586_156_581);
            let v: serde_json::Value = serde_json::from_str(&row).unwrap();
            assert_eq!(v["seq"], i);
            assert_eq!(v["time"], "2022-03-29T20:35:56.581Z");
            assert!(v["car"].as_str().unwrap().starts_with("c000"));
            let speed = v["speed"].as_u64().unwrap();
            assert!(speed <= 180);
            let gas = v["gas"].as_f64().unwrap();
            assert!((0.0..=100.0).contains(&gas));
        }
    }

    #[test]
    fn dates_are_rfc3339() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_ms(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    }

    #[test]
    fn assets_are_embedded() {
        assert!(asset("/").is_some());
        assert!(asset("/demo.js").is_some());
        assert!(asset("/demo.css").is_some());
        assert!(asset("/table.html").is_some());
        assert!(asset("/table.js").is_some());
        assert!(asset("/games.html").is_some());
        assert!(asset("/games.js").is_some());
        assert!(asset("/nope").is_none());
        assert!(std::str::from_utf8(INDEX_HTML).unwrap().contains("demo.js"));
        assert!(std::str::from_utf8(TABLE_HTML)
            .unwrap()
            .contains("table.js"));
        assert!(std::str::from_utf8(GAMES_HTML)
            .unwrap()
            .contains("games.js"));
        assert!(std::str::from_utf8(INDEX_HTML)
            .unwrap()
            .contains("games.html"));
    }
}
