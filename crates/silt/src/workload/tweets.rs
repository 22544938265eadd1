//! The tweet workload of seed 001 §3.5.1 (LevelDB++'s Twitter-based
//! generator), deterministic from a seed.
//!
//! What the paper's seed data set fixes, and how it is reproduced here:
//!
//! - ~550 bytes per tweet as JSON: the text's length is chosen so that each
//!   tweet's JSON is `target_bytes` ± `text_jitter` bytes;
//! - the user id follows a rank-frequency distribution (a few users post a
//!   lot, most post little): Zipf with exponent `zipf_s` over `users`
//!   users, ranks shuffled into ids so that a user's id says nothing about
//!   its rank; `users` defaults to tweets / 30 (30 tweets per user on
//!   average);
//! - creation times advance ~35 tweets per second: each second gets a
//!   uniformly drawn count in `0..=2 × rate` (the paper's "uniform with
//!   minimum 0 and maximum two times the average"), spread within the
//!   second by a uniform millisecond jitter;
//! - tweet ids grow with time (like Twitter's), `created_at` is epoch
//!   seconds, `created_at_ms` epoch milliseconds.
//!
//! Fields: `id`, `user_id`, `created_at`, `created_at_ms`, `text`, `lang`,
//! `source`, `retweet_count`, `favorite_count`, `in_reply_to` (null or a
//! tweet id), `hashtags` (array), `place`, `lat`, `lon`, `followers`.
//! Ids and times are time-correlated (good for zone maps); `user_id` is not.

use super::{SplitMix64, Zipf};
use crate::value::Value;

/// How to generate tweets.
#[derive(Clone, Debug)]
pub struct TweetOptions {
    pub seed: u64,
    /// Tweets to generate (also sets the default user count).
    pub count: u64,
    /// Distinct users (default `count / 30`, at least 1).
    pub users: Option<u64>,
    /// Zipf exponent of the tweets-per-user distribution.
    pub zipf_s: f64,
    /// Average tweets per second.
    pub rate_per_s: f64,
    /// First second (epoch seconds); default 2015-01-01T00:00:00Z.
    pub start_epoch_s: i64,
    /// Target JSON size of a tweet.
    pub target_bytes: usize,
    /// The size varies uniformly by up to this much either way.
    pub text_jitter: usize,
}

impl Default for TweetOptions {
    fn default() -> Self {
        TweetOptions {
            seed: 1,
            count: 100_000,
            users: None,
            zipf_s: 1.0,
            rate_per_s: 35.0,
            start_epoch_s: 1_420_070_400,
            target_bytes: 550,
            text_jitter: 120,
        }
    }
}

impl TweetOptions {
    /// Distinct users: `users`, or one per 30 tweets.
    pub fn users(&self) -> u64 {
        self.users.unwrap_or(self.count / 30).max(1)
    }
}

const LANGS: [&str; 6] = ["en", "en", "en", "es", "pt", "ja"];
const SOURCES: [&str; 4] = [
    "Twitter for iPhone",
    "Twitter for Android",
    "Twitter Web Client",
    "Instagram",
];
const PLACES: [(&str, f64, f64); 6] = [
    ("Manhattan, NY", -73.97, 40.78),
    ("Brooklyn, NY", -73.95, 40.65),
    ("Queens, NY", -73.79, 40.73),
    ("Buffalo, NY", -78.88, 42.89),
    ("Rochester, NY", -77.61, 43.16),
    ("Albany, NY", -73.76, 42.65),
];
const SYLLABLES: [&str; 16] = [
    "ka", "lo", "mi", "ne", "ta", "ri", "su", "po", "an", "el", "or", "ve", "di", "ba", "ju", "ze",
];

/// Generates tweets as records (see the module doc). An iterator.
#[derive(Clone, Debug)]
pub struct TweetGen {
    opts: TweetOptions,
    rng: SplitMix64,
    zipf: Zipf,
    users: u64,
    produced: u64,
    second: i64,
    left_in_second: u64,
    /// Multiplier that scatters user ranks over ids (odd, so a bijection
    /// modulo 2^64; reduced modulo a prime above the user count).
    scatter: u64,
    id_space: u64,
}

impl TweetGen {
    /// A generator of `opts.count` tweets.
    pub fn new(opts: TweetOptions) -> TweetGen {
        let users = opts.users();
        let mut rng = SplitMix64::new(opts.seed);
        let scatter = rng.next_u64() | 1;
        TweetGen {
            zipf: Zipf::new(users, opts.zipf_s),
            users,
            produced: 0,
            second: opts.start_epoch_s - 1,
            left_in_second: 0,
            scatter,
            id_space: next_prime(users.max(2)),
            rng,
            opts,
        }
    }

    /// Distinct users.
    pub fn users(&self) -> u64 {
        self.users
    }

    /// The user id of Zipf rank `rank` (1 = the most active user).
    pub fn user_of_rank(&self, rank: u64) -> i64 {
        // rank -> (rank * scatter) mod p, a bijection of 1..p-1 when p is
        // prime and does not divide scatter; ids land in 1..p.
        let p = self.id_space;
        let m = self.scatter % p;
        let m = if m == 0 { 1 } else { m };
        (((u128::from(rank % p) * u128::from(m)) % u128::from(p)) as i64).max(1)
    }

    /// A user drawn from the same distribution as the tweets' authors (the
    /// paper draws query conditions from the data's distribution).
    pub fn sample_user(&mut self) -> i64 {
        let r = self.zipf.sample(&mut self.rng);
        self.user_of_rank(r)
    }

    fn word(&mut self, out: &mut String) {
        let n = 1 + self.rng.below(4);
        for _ in 0..n {
            out.push_str(SYLLABLES[self.rng.below(SYLLABLES.len() as u64) as usize]);
        }
    }

    fn next_tweet(&mut self) -> Value {
        while self.left_in_second == 0 {
            self.second += 1;
            let max = (2.0 * self.opts.rate_per_s).round().max(1.0) as u64;
            self.left_in_second = self.rng.below(max + 1);
        }
        self.left_in_second -= 1;
        self.produced += 1;
        let id = self.produced as i64;
        let ms = self.rng.below(1000) as i64;
        let user = self.sample_user();
        let (place, lon, lat) = PLACES[self.rng.below(PLACES.len() as u64) as usize];
        let jitter = |r: &mut SplitMix64| (r.next_f64() - 0.5) * 0.1;
        let lon = lon + jitter(&mut self.rng);
        let lat = lat + jitter(&mut self.rng);
        let reply = if self.rng.below(5) == 0 && id > 1 {
            Value::Int(1 + self.rng.below(id as u64 - 1) as i64)
        } else {
            Value::Null
        };
        let mut tags = Vec::new();
        for _ in 0..self.rng.below(3) {
            let mut w = String::new();
            self.word(&mut w);
            tags.push(Value::String(w));
        }
        let mut fields: Vec<(String, Value)> = vec![
            ("id".into(), Value::Int(id)),
            ("user_id".into(), Value::Int(user)),
            ("created_at".into(), Value::Int(self.second)),
            ("created_at_ms".into(), Value::Int(self.second * 1000 + ms)),
            ("text".into(), Value::String(String::new())),
            (
                "lang".into(),
                Value::String(LANGS[self.rng.below(LANGS.len() as u64) as usize].into()),
            ),
            (
                "source".into(),
                Value::String(SOURCES[self.rng.below(SOURCES.len() as u64) as usize].into()),
            ),
            (
                "retweet_count".into(),
                Value::Int(self.rng.below(50) as i64),
            ),
            (
                "favorite_count".into(),
                Value::Int(self.rng.below(200) as i64),
            ),
            ("in_reply_to".into(), reply),
            ("hashtags".into(), Value::Array(tags)),
            ("place".into(), Value::String(place.into())),
            ("lat".into(), Value::Double((lat * 1e5).round() / 1e5)),
            ("lon".into(), Value::Double((lon * 1e5).round() / 1e5)),
            ("followers".into(), Value::Int(self.rng.below(5000) as i64)),
        ];
        // Size the text so that the JSON lands near the target.
        let base = crate::value::to_json(&Value::Object(fields.clone()))
            .to_string()
            .len();
        let j = self.opts.text_jitter as i64;
        let want = self.opts.target_bytes as i64 - base as i64
            + if j > 0 {
                self.rng.below(2 * j as u64 + 1) as i64 - j
            } else {
                0
            };
        let want = want.max(10) as usize;
        let mut text = String::with_capacity(want + 8);
        while text.len() < want {
            if !text.is_empty() {
                text.push(' ');
            }
            self.word(&mut text);
        }
        text.truncate(want);
        fields[4].1 = Value::String(text);
        Value::Object(fields)
    }
}

impl Iterator for TweetGen {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        if self.produced >= self.opts.count {
            return None;
        }
        Some(self.next_tweet())
    }
}

fn next_prime(n: u64) -> u64 {
    let mut p = n + 1;
    loop {
        if is_prime(p) {
            return p;
        }
        p += 1;
    }
}

fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2;
    while d * d <= n {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn tweets_have_the_papers_shape() {
        let opts = TweetOptions {
            count: 30_000,
            seed: 3,
            ..Default::default()
        };
        let tweets: Vec<Value> = TweetGen::new(opts.clone()).collect();
        assert_eq!(tweets.len(), 30_000);
        // Deterministic.
        let again: Vec<Value> = TweetGen::new(opts).take(50).collect();
        assert_eq!(&tweets[..50], &again[..]);
        // ~550 bytes of JSON each.
        let total: usize = tweets
            .iter()
            .map(|t| crate::value::to_json(t).to_string().len())
            .sum();
        let avg = total / tweets.len();
        assert!((500..=600).contains(&avg), "average size {avg}");
        // ~35 per second, times non-decreasing, ids increasing.
        let first = tweets[0].get("created_at").and_then(Value::as_i64).unwrap();
        let last = tweets[29_999]
            .get("created_at")
            .and_then(Value::as_i64)
            .unwrap();
        let rate = 30_000.0 / (last - first + 1) as f64;
        assert!((30.0..=40.0).contains(&rate), "rate {rate}/s");
        for w in tweets.windows(2) {
            let t = |v: &Value, f: &str| v.get(f).and_then(Value::as_i64).unwrap();
            assert!(t(&w[0], "created_at") <= t(&w[1], "created_at"));
            assert!(t(&w[0], "id") < t(&w[1], "id"));
        }
        // ~30 tweets per user on average, heavily skewed.
        let mut per_user: HashMap<i64, u64> = HashMap::new();
        for t in &tweets {
            *per_user
                .entry(t.get("user_id").and_then(Value::as_i64).unwrap())
                .or_default() += 1;
        }
        assert!(per_user.len() <= 1000);
        let max = per_user.values().max().copied().unwrap_or(0);
        assert!(max > 1000, "the most active user has {max} tweets");
        assert!(per_user.keys().all(|&u| u >= 1));
    }
}
