//! Reading bench sizes from the environment, shared by the benches.

/// A comma-separated list of positive numbers from `var`, or `default`.
pub fn list(var: &str, default: Vec<u64>) -> Vec<u64> {
    match std::env::var(var) {
        Ok(value) if !value.trim().is_empty() => value
            .split(',')
            .map(|n| match n.trim().parse::<u64>() {
                Ok(n) if n > 0 => n,
                _ => panic!(
                    "{var} must be a comma-separated list of positive numbers, not {value:?}"
                ),
            })
            .collect(),
        _ => default,
    }
}

/// A positive number from `var`, or `default`.
pub fn number(var: &str, default: usize) -> usize {
    match std::env::var(var) {
        Ok(value) if !value.trim().is_empty() => match value.trim().parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => panic!("{var} must be a positive number, not {value:?}"),
        },
        _ => default,
    }
}

/// The groups named in `MONGO_SOCIAL_BENCH_GROUPS` (comma-separated), or `None` for all.
pub fn groups() -> Option<Vec<String>> {
    std::env::var("MONGO_SOCIAL_BENCH_GROUPS")
        .ok()
        .filter(|value| !value.trim().is_empty())
        .map(|groups| groups.split(',').map(|g| g.trim().to_owned()).collect())
}

/// Whether `group` is among `groups` (all run when `None`).
pub fn runs(groups: &Option<Vec<String>>, group: &str) -> bool {
    groups
        .as_ref()
        .is_none_or(|groups| groups.iter().any(|g| g == group))
}

/// A multi-threaded runtime and, made in it, a client of the test server (`MONGODB_URI`, or the
/// fixture's FerretDB) with a [`CommandCounter`] attached, and what the server is.
pub fn connect() -> (
    tokio::runtime::Runtime,
    mongodb::Client,
    mongo_social_lab::CommandCounter,
    mongo_social::server::ServerInfo,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let commands = mongo_social_lab::CommandCounter::new();
    let (client, info) = rt.block_on(async {
        let mut options = mongodb::options::ClientOptions::parse(mongo_social_lab::server_uri())
            .await
            .expect("parse the server URI");
        commands.attach(&mut options);
        let client = mongodb::Client::with_options(options).expect("client");
        let info = mongo_social::server::ServerInfo::detect(&client)
            .await
            .expect("detect the server");
        (client, info)
    });
    (rt, client, commands, info)
}

/// `4 commands [insert, find, update x2]`: the count and the names, repeats folded.
pub fn describe(names: &[String]) -> String {
    let mut runs: Vec<(String, usize)> = Vec::new();
    for name in names {
        match runs.last_mut() {
            Some((last, count)) if last == name => *count += 1,
            _ => runs.push((name.clone(), 1)),
        }
    }
    let folded: Vec<String> = runs
        .into_iter()
        .map(|(name, count)| {
            if count == 1 {
                name
            } else {
                format!("{name} x{count}")
            }
        })
        .collect();
    let plural = if names.len() == 1 { "" } else { "s" };
    format!("{} command{plural} [{}]", names.len(), folded.join(", "))
}

/// Criterion with this crate's bench defaults (10 samples, 1 s warm-up, `measurement` per
/// benchmark), overridden by the usual command-line flags.
pub fn criterion(measurement: std::time::Duration) -> criterion::Criterion {
    criterion::Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(measurement)
        .configure_from_args()
}
