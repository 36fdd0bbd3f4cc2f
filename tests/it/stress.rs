//! How hard the heavy loops push. Every repetition count and proptest case
//! count in `races` and `model` goes through [`scaled`]: the defaults keep
//! `cargo test` quick on two cores, and `RECON_STRESS=N` multiplies them all
//! by N (for example `RECON_STRESS=20 cargo test --test it races::`).

pub const STRESS_ENV: &str = "RECON_STRESS";

/// `n` times the stress factor.
pub fn scaled(n: usize) -> usize {
    n * factor()
}

fn factor() -> usize {
    match std::env::var(STRESS_ENV) {
        Err(_) => 1,
        Ok(text) => match text.trim().parse::<usize>() {
            Ok(n) if n >= 1 => n,
            // A typo must not quietly run the small default.
            _ => panic!("{STRESS_ENV} must be a positive integer, not {text:?}"),
        },
    }
}
