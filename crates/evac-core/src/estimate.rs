//! How long a live migration takes, and whether KubeVirt lets it finish.
//!
//! Pre-copy migration sends the guest's memory while the guest keeps writing to it: it converges
//! at the bandwidth the dirty rate leaves, `memory / (bandwidth - dirty rate)`. KubeVirt aborts a
//! migration that makes no progress for `progressTimeout` seconds, and one that runs longer than
//! `completionTimeoutPerGiB` times its size in decimal GB, rounded up (`getVMIMigrationDataSize`
//! in `pkg/virt-launcher/virtwrap/manager.go`; the monitor's `processInflightMigration`, at HEAD
//! `handleLegacyConvergence`, in `pkg/virt-launcher/virtwrap/live-migration-source.go`). The
//! simulator's migrations take this long; evac orders evacuations by it.

/// How a migration ends, as estimated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Estimate {
    /// It converges after this many seconds.
    Completes(f64),
    /// It would run past the completion timeout, and is aborted after this many seconds.
    TimesOut(f64),
    /// The guest dirties memory as fast as it is sent: aborted at the progress timeout.
    NeverConverges(f64),
}

impl Estimate {
    /// How long until the migration ends, successfully or not, in seconds.
    pub fn seconds(self) -> f64 {
        match self {
            Self::Completes(s) | Self::TimesOut(s) | Self::NeverConverges(s) => s,
        }
    }

    /// Whether the VM ends on the target.
    pub fn completes(self) -> bool {
        matches!(self, Self::Completes(_))
    }
}

/// What a migration's duration depends on: the VM's memory and dirty rate (bytes, bytes per
/// second), the bandwidth (bytes per second), and KubeVirt's two timeouts (seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MigrationInputs {
    /// The guest's memory.
    pub memory: f64,
    /// How fast the guest writes to its memory.
    pub dirty_rate: f64,
    /// What one migration may send per second.
    pub bandwidth: f64,
    /// `completionTimeoutPerGiB`.
    pub completion_timeout_per_gib: u64,
    /// `progressTimeout`.
    pub progress_timeout: u64,
    /// At the completion timeout KubeVirt helps the migration complete (post-copy, or the guest
    /// paused: `allowWorkloadDisruption`, `handleLegacyConvergence`) rather than abort it: what is
    /// left of the memory then goes at the full bandwidth.
    pub assisted: bool,
    /// `allowAutoConverge`: QEMU throttles the guest's vCPUs while it dirties memory faster than
    /// half of what the migration sends ([`throttled`]).
    pub auto_converge: bool,
}

/// QEMU's auto-converge, with its defaults (`migration/options.c`, `migration/ram.c`
/// `migration_trigger_throttle`, `mig_throttle_guest_down`): while the guest dirties more than
/// `throttle-trigger-threshold` (50 %) of what is sent, its vCPUs are throttled, from
/// `cpu-throttle-initial` (20 %) up by `cpu-throttle-increment` (10 points) to `max-cpu-throttle`
/// (99 %); a throttled guest dirties in proportion to the time it runs. The steps come every two
/// sync periods (about a second each), a few seconds in all, which the estimate leaves out.
const THROTTLE_TRIGGER: f64 = 0.5;
const THROTTLE_INITIAL: f64 = 0.2;
const THROTTLE_INCREMENT: f64 = 0.1;
const THROTTLE_MAX: f64 = 0.99;

/// The dirty rate auto-converge leaves the guest: throttled step by step until it is at most
/// half of `bandwidth`, or at the throttle's maximum.
pub fn throttled(dirty_rate: f64, bandwidth: f64) -> f64 {
    let mut throttle = 0.0;
    while dirty_rate * (1.0 - throttle) > THROTTLE_TRIGGER * bandwidth && throttle < THROTTLE_MAX {
        throttle = if throttle == 0.0 {
            THROTTLE_INITIAL
        } else {
            (throttle + THROTTLE_INCREMENT).min(THROTTLE_MAX)
        };
    }
    dirty_rate * (1.0 - throttle)
}

/// Estimates one migration.
pub fn estimate(inputs: &MigrationInputs) -> Estimate {
    let gigabytes = (inputs.memory / 1e9).ceil().max(1.0);
    let timeout = inputs.completion_timeout_per_gib as f64 * gigabytes;
    let dirty_rate =
        if inputs.auto_converge { throttled(inputs.dirty_rate, inputs.bandwidth) } else { inputs.dirty_rate };
    let effective = inputs.bandwidth - dirty_rate;
    if effective <= 0.0 {
        return Estimate::NeverConverges(inputs.progress_timeout as f64);
    }
    let needed = inputs.memory / effective;
    if needed <= timeout {
        Estimate::Completes(needed)
    } else if inputs.assisted {
        let left = (inputs.memory - effective * timeout).max(0.0);
        Estimate::Completes(timeout + left / inputs.bandwidth)
    } else {
        Estimate::TimesOut(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: f64 = 1024.0 * 1024.0;
    const GI: f64 = 1024.0 * MI;

    fn inputs(memory: f64, dirty_rate: f64, bandwidth: f64) -> MigrationInputs {
        MigrationInputs {
            memory,
            dirty_rate,
            bandwidth,
            completion_timeout_per_gib: 150,
            progress_timeout: 150,
            assisted: false,
            auto_converge: false,
        }
    }

    /// (memory, dirty rate, bandwidth, estimate): memory over what the dirty rate leaves of the
    /// bandwidth; 150 s per started GB at most (16Gi is 17.2 GB: 18 × 150 s); the progress
    /// timeout when the guest dirties as fast as the link sends.
    #[test]
    fn memory_over_the_bandwidth_the_dirty_rate_leaves() {
        let rows = [
            (6.0 * GI, 22.0 * MI, 128.0 * MI, Estimate::Completes(6144.0 / 106.0)),
            (16.0 * GI, 104.0 * MI, 128.0 * MI, Estimate::Completes(16384.0 / 24.0)),
            (16.0 * GI, 124.0 * MI, 128.0 * MI, Estimate::TimesOut(18.0 * 150.0)),
            (1.0 * GI, 0.0, 1.0 * MI, Estimate::TimesOut(2.0 * 150.0)),
            (0.5 * GI, 0.0, 1.0 * MI, Estimate::TimesOut(150.0)),
            (4.0 * GI, 128.0 * MI, 128.0 * MI, Estimate::NeverConverges(150.0)),
            (4.0 * GI, 200.0 * MI, 128.0 * MI, Estimate::NeverConverges(150.0)),
            // Exactly at the completion timeout (1.5 GB in 2 x 150 s at 5 MB/s): KubeVirt aborts
            // only a migration that runs past it.
            (1.5e9, 0.0, 5e6, Estimate::Completes(300.0)),
        ];
        for (memory, dirty, bandwidth, expected) in rows {
            let got = estimate(&inputs(memory, dirty, bandwidth));
            match (got, expected) {
                (Estimate::Completes(a), Estimate::Completes(b)) => {
                    assert!((a - b).abs() < 1e-9, "{memory} {dirty} {bandwidth}: {a} != {b}")
                }
                _ => assert_eq!(got, expected, "{memory} {dirty} {bandwidth}"),
            }
        }
        // Helped at the completion timeout (post-copy): 4Gi at 60Mi/s dirtied over 64Mi/s does
        // 4 x 750 s = 3000Mi in the 750 s (5 GB x 150 s), then the 1096Mi left at 64Mi/s.
        let assisted = MigrationInputs { assisted: true, ..inputs(4.0 * GI, 60.0 * MI, 64.0 * MI) };
        assert_eq!(estimate(&assisted), Estimate::Completes(750.0 + 1096.0 / 64.0));
        let never = MigrationInputs { assisted: true, ..inputs(4.0 * GI, 64.0 * MI, 64.0 * MI) };
        assert_eq!(estimate(&never), Estimate::NeverConverges(150.0));
        assert!(estimate(&inputs(GI, 0.0, 64.0 * MI)).completes());
        // Auto-converge: 100Mi/s dirtied over 64Mi/s is throttled 20, 30, ... 70 % (30Mi/s, at
        // most half of 64Mi/s): 4Gi at the 34Mi/s left. Under the trigger, no throttle.
        let converging = MigrationInputs { auto_converge: true, ..inputs(4.0 * GI, 100.0 * MI, 64.0 * MI) };
        match estimate(&converging) {
            Estimate::Completes(s) => assert!((s - 4096.0 / 34.0).abs() < 1e-6, "{s}"),
            other => panic!("{other:?}"),
        }
        assert!((throttled(20.0 * MI, 64.0 * MI) - 20.0 * MI).abs() < 1e-6);
        assert!((throttled(10_000.0 * MI, 64.0 * MI) - 100.0 * MI).abs() < 1e-3);
        assert!(!estimate(&inputs(GI, 64.0 * MI, 64.0 * MI)).completes());
        assert_eq!(Estimate::TimesOut(3.0).seconds(), 3.0);
        assert_eq!(Estimate::NeverConverges(4.0).seconds(), 4.0);
        assert_eq!(Estimate::Completes(5.0).seconds(), 5.0);
    }
}
