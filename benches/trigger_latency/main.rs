//! Trigger latency and memory of the controller on the local control plane (etcd +
//! kube-apiserver from the test harness).
//!
//! - Latency: the scheduled instant → status write acknowledged, as the controller logs it
//!   (`trigger applied`, `lateness_ms`), with 1, 100 and 1,000 TidalSchedulers firing in
//!   the same second; next to a baseline of the same number of plain status patches sent
//!   by a bare client with the same concurrency (the physical limit of this machine). The
//!   two take turns — baseline round, controller round, baseline round, ... — on objects
//!   of their own, so slow drifts of this shared host weigh on both alike.
//! - Memory: the controller's resident set with 10,000 TidalSchedulers of 5 rules each.
//!
//! Run: `cargo bench --bench trigger_latency` (numbers go to stdout; docs/performance.md keeps
//! them). Its options (`TIDAL_BENCH_*`: one size, rounds, `Scale` mode, a fenced or
//! watching baseline, tracing on against off) are in [`options`]; CI runs every bench
//! once at its smallest size (see `.ci/run`).
//!
//! Parts: [`workload`] (the objects), [`controller`] and [`baseline`] (the two sides),
//! [`memory`].

mod baseline;
mod controller;
mod memory;
mod neighbour;
mod options;
mod workload;

use jiff::{SignedDuration, Timestamp};
use tidal_harness::cluster::control_plane;
use tidal_harness::jaeger::traced_control_plane;
use tidal_harness::measure::{grouped, run_heading, summary};

use baseline::Baseline;
use controller::Controller;
use neighbour::{Neighbour, bursts};
use options::Options;
use workload::{bench_env, first_instant};

/// The controller's `--concurrency`, also the baseline's.
const CONCURRENCY: usize = 64;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = Options::from_env()?;
    let control_plane = if options.tracing {
        traced_control_plane()
    } else {
        control_plane()
    };
    println!("control plane: {}", control_plane.kubeconfig().display());
    println!(
        "\ntrigger latency, scheduled instant -> status write acknowledged (ms); concurrency {CONCURRENCY}; apply: {}{}",
        if options.scale() { "Scale" } else { "Status" },
        if options.scale() && options.baseline_fenced {
            " (baseline fenced)"
        } else {
            ""
        }
    );
    let (first, second) = if options.tracing {
        ("tracing on p50 / p99 / max", "tracing off p50 / p99 / max")
    } else {
        ("controller p50 / p99 / max", "baseline p50 / p99 / max")
    };
    // A Markdown table, as docs/performance.md keeps it: paste it there with the date.
    println!(
        "{}\n\n| objects | samples | {first} | {second} | p99 ratio |\n|---:|---:|---|---|---:|",
        run_heading()
    );
    // (objects, rounds, seconds between slots, repetitions): a p99 needs 100 samples to be
    // more than the maximum, and an object holds at most 100 rules, hence 5 × 20 for 1.
    // At 1,000 a round lasts 3–7 s here and whatever else the host runs in those seconds
    // lands on one side: ten rounds a side, and slots far enough apart for the controller's
    // Events, sent after its burst, to be out before the baseline's (counted below).
    // Rounds given: that many, once (CI's smoke run: 1). 10,000 only when asked for
    // (`TIDAL_BENCH_OBJECTS=10000`: about 20 minutes here).
    let cases = [
        (1, 20, 1, 5),
        (100, 5, 4, 1),
        (1000, 10, 12, 1),
        (10_000, 3, 80, 1),
    ];
    for (objects, rounds, spacing, repetitions) in cases {
        let wanted = match options.only_objects {
            Some(only) => only == objects,
            None => objects <= 1000,
        };
        if !wanted {
            continue;
        }
        let (rounds, repetitions) = options.rounds.map_or((rounds, repetitions), |n| (n, 1));
        let (mut controller, mut baseline) = (Vec::new(), Vec::new());
        // Tracing mode: twice as many repetitions, the sides swapping slots each time, so
        // that neither always goes first.
        // Slots half as far apart again, so that each side's Events, published after its
        // burst, are out before the other side's next burst (checked below).
        let (repetitions, spacing) = if options.tracing {
            (2 * repetitions, spacing * 3 / 2)
        } else {
            (repetitions, spacing)
        };
        for repetition in 0..repetitions {
            let swap = options.tracing && repetition % 2 == 1;
            let (c, b) = take_turns(&options, objects, rounds, spacing, swap).await?;
            controller.extend(c);
            baseline.extend(b);
        }
        let (c, b) = (summary(&controller), summary(&baseline));
        println!(
            "| {} | {} | {} / {} / {} | {} / {} / {} | {:.2}× |",
            grouped(objects as f64),
            grouped(controller.len() as f64),
            grouped(c.0),
            grouped(c.1),
            grouped(c.2),
            grouped(b.0),
            grouped(b.1),
            grouped(b.2),
            c.1 / b.1
        );
    }
    if let Some(objects) = options.memory_objects {
        memory::memory(&options, objects).await?;
    }
    Ok(())
}

/// Runs `rounds` rounds of each side, taking turns: slot k is at first + k × `spacing`
/// seconds; the baseline (tracing mode: the untraced controller) fires at even slots, the
/// controller's objects at odd ones — the other way round with `swap`. Returns the
/// controller's and the baseline's latencies.
async fn take_turns(
    options: &Options,
    objects: usize,
    rounds: usize,
    spacing: i64,
    swap: bool,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let first = first_instant(2 * objects);
    let slots = |parity: i64| -> Vec<Timestamp> {
        (0..rounds as i64)
            .map(|round| first + SignedDuration::from_secs(spacing * (2 * round + parity)))
            .collect()
    };
    let (first_side, second_side) = if swap { (0, 1) } else { (1, 0) };
    if options.tracing {
        let traced = Controller::start(options, objects, slots(first_side), true).await?;
        let untraced = Controller::start(options, objects, slots(second_side), false).await?;
        anyhow::ensure!(Timestamp::now() < first, "objects set up too late");
        let (untraced, untraced_events) = untraced.finish().await?;
        let (traced, traced_events) = traced.finish().await?;
        let crossing = [
            events_in_bursts(&traced_events, &slots(second_side), &untraced),
            events_in_bursts(&untraced_events, &slots(first_side), &traced),
        ];
        eprintln!(
            "Events published during the other side's bursts: traced {}, untraced {}",
            crossing[0], crossing[1]
        );
        anyhow::ensure!(
            crossing == [0, 0],
            "the sides are not isolated: one side's Events landed in the other's bursts"
        );
        return Ok((traced, untraced));
    }
    let controller = Controller::start(options, objects, slots(1), false).await?;
    let baseline = Baseline::prepare(*options, objects, slots(0)).await?;
    let neighbour = match options.neighbour {
        Some(_) => Some(Neighbour::start(&bench_env(options).await).await?),
        None => None,
    };
    anyhow::ensure!(Timestamp::now() < first, "objects set up too late");
    let baseline = baseline.run().await?;
    let (controller, events) = controller.finish().await?;
    if let (Some(neighbour), Some(flow_schemas)) = (neighbour, options.neighbour) {
        let reads = neighbour.finish().await?;
        let bursts = (bursts(&slots(1), &controller), bursts(&slots(0), &baseline));
        neighbour::report(flow_schemas, &reads, &bursts.0, &bursts.1);
    }
    eprintln!(
        "controller Events published during the baseline's bursts: {}",
        events_in_bursts(&events, &slots(0), &baseline)
    );
    Ok((controller, baseline))
}

/// How many of the times `published` fall in a burst of the other side: from one of its
/// `instants` to its slowest latency (`latencies`, ms) later.
fn events_in_bursts(published: &[Timestamp], instants: &[Timestamp], latencies: &[f64]) -> usize {
    let longest = SignedDuration::from_secs_f64(summary(latencies).2 / 1000.0);
    published
        .iter()
        .filter(|&&at| {
            instants
                .iter()
                .any(|&start| at >= start && at <= start + longest)
        })
        .count()
}
