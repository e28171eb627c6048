//! A path controller modelled on CERN's NOTED (docs/interfaces.md §1,
//! `controller`; ../shared/reference/EXPERIMENTS.md §6): it watches one
//! link's utilisation and, when the link stays saturated while large
//! transfers run over it, moves those transfers to their alternative path,
//! and gives the path back when they are done or the load has gone.
//!
//! Clock-agnostic: the owner (simulator or emulator) calls [`Noted::step`]
//! once per sample interval with the time, the watched link's utilisation
//! over the last interval and the state of each candidate flow (one with an
//! alternative); it appends what happened ([`Event`]s: state changes, flows
//! to move, flows to move back) and the owner carries out the moves.
//!
//! States (after NOTED's dashboard): `idle` (no alarm) → `decision` (the
//! link is saturated: utilisation ≥ `threshold`; back to idle when it drops
//! below) → `action` (saturated for `hold_ns` and eligible transfers exist:
//! they are moved) → `released` (the moved flows are done, or the link's
//! utilisation plus the moved flows' rate — the load if they came back —
//! stayed below `release_threshold` for `release_hold_ns`: the flows still
//! running are moved back) → `idle` at the next sample. Projecting the moved
//! flows back onto the link is the hysteresis: a release that would
//! saturate the link again does not happen, so the controller does not flap.
//! The projection needs the flows' demand, which their rate on the
//! alternative shows only while nothing there holds them back: while a link
//! the move put them on is saturated ([`Candidate::held`]), a greedy flow
//! (say, the only one left, on a narrower alternative) would take the
//! watched link back whole, so they stay until they are done or the
//! alternative has room. Only flows whose current path crosses the watched
//! link are moved (an `[[events]]` change may have taken one off it).
//! Hold times count from the first sample that met the condition.

use crate::Nanos;
use serde::Deserialize;

/// The `controller` object of a run config: `{"kind": "noted", ...}`.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ControllerConfig {
    Noted(NotedConfig),
}

#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NotedConfig {
    /// The watched link (its directed name).
    pub link: String,
    /// Saturated: utilisation over a sample interval ≥ this (0..1].
    pub threshold: f64,
    /// Saturated this long (and eligible transfers exist): action.
    pub hold_ns: u64,
    /// Released when utilisation + the moved flows' rate stays below this ...
    pub release_threshold: f64,
    /// ... for this long (or when the moved flows are done).
    pub release_hold_ns: u64,
    /// Eligible: transfers with at least this many bytes still to deliver ...
    #[serde(default)]
    pub min_bytes: u64,
    /// ... and at least this delivery rate (bulk flows: the rate alone).
    #[serde(default)]
    pub min_rate_bps: f64,
    /// Where each candidate flow moves.
    pub alternatives: Vec<Alternative>,
}

#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Alternative {
    pub flow: u32,
    /// Link names, src → dst.
    pub path: Vec<String>,
    /// Link names, dst → src; absent: the return path stays as it is.
    #[serde(default)]
    pub return_path: Option<Vec<String>>,
}

impl NotedConfig {
    /// Parameter checks (paths are the owner's: they need the network).
    pub fn check(&self) -> Result<(), String> {
        let frac = |v: f64| v > 0.0 && v <= 1.0;
        if !frac(self.threshold) || !frac(self.release_threshold) {
            return Err(format!(
                "controller: threshold and release_threshold must be in (0, 1] (got {} and {})",
                self.threshold, self.release_threshold
            ));
        }
        if self.release_threshold > self.threshold {
            return Err(format!(
                "controller: release_threshold {} above threshold {} (the controller would flap)",
                self.release_threshold, self.threshold
            ));
        }
        if !(self.min_rate_bps >= 0.0) {
            return Err("controller: min_rate_bps must be >= 0".into());
        }
        let mut flows: Vec<u32> = self.alternatives.iter().map(|a| a.flow).collect();
        flows.sort_unstable();
        if let Some(w) = flows.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("controller.alternatives: flow {} given twice", w[0]));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Idle,
    Decision,
    Action,
    Released,
}

impl State {
    /// The name in the `events` table.
    pub fn name(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Decision => "decision",
            State::Action => "action",
            State::Released => "released",
        }
    }
}

/// A flow that has an alternative, as seen at this sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub flow: u32,
    /// Its current delivery rate, bits/s.
    pub rate_bps: f64,
    /// A transfer's bytes still to deliver; None for a bulk flow.
    pub bytes_left: Option<u64>,
    /// Finished (a transfer delivered everything, a flow stopped) or not
    /// started.
    pub done: bool,
    /// Moved, and a route event has since taken it over: no longer the
    /// controller's to move back.
    pub rerouted: bool,
    /// Its current path crosses the watched link.
    pub crosses: bool,
    /// Moved, and a link its alternative put it on was saturated (at least
    /// `threshold`) over the interval: its rate is what that link let
    /// through, below what it would take back.
    pub held: bool,
}

/// What one step did, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The controller entered `state`; `why` is one line for the events table.
    State { state: State, why: String },
    /// Move this flow to its alternative path.
    Move { flow: u32 },
    /// Move this flow back to the path it had before.
    MoveBack { flow: u32 },
}

/// The controller's state machine; see the module documentation.
#[derive(Clone, Debug)]
pub struct Noted {
    cfg: NotedConfig,
    link_rate_bps: f64,
    state: State,
    /// First sample of the current saturation (decision) or of the current
    /// release condition (action).
    since: Option<Nanos>,
    moved: Vec<u32>,
}

impl Noted {
    /// A controller in `idle`; `link_rate_bps` is the watched link's rate.
    pub fn new(cfg: NotedConfig, link_rate_bps: u64) -> Noted {
        Noted { cfg, link_rate_bps: link_rate_bps as f64, state: State::Idle, since: None, moved: Vec::new() }
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// Flows currently on their alternative.
    pub fn moved(&self) -> &[u32] {
        &self.moved
    }

    pub fn config(&self) -> &NotedConfig {
        &self.cfg
    }

    /// For an owner's [`Candidate::held`]: a link of the flow's current `path`
    /// that is not on its `home` path (so the move put it there) was at least
    /// `threshold` busy over the interval (`utilisation` of a link).
    pub fn held_by<L: PartialEq + Copy>(
        &self,
        path: impl IntoIterator<Item = L>,
        home: &[L],
        utilisation: impl Fn(L) -> f64,
    ) -> bool {
        path.into_iter().any(|l| !home.contains(&l) && utilisation(l) >= self.cfg.threshold)
    }

    fn enter(&mut self, state: State, why: String, out: &mut Vec<Event>) {
        self.state = state;
        self.since = None;
        out.push(Event::State { state, why });
    }

    /// One sample: `utilisation` of the watched link over the last interval
    /// (0..1), every candidate flow's state. Appends what happened to `out`.
    pub fn step(&mut self, now: Nanos, utilisation: f64, candidates: &[Candidate], out: &mut Vec<Event>) {
        let cfg = &self.cfg;
        let (threshold, hold) = (cfg.threshold, cfg.hold_ns);
        let was = self.state;
        if was == State::Released {
            self.enter(State::Idle, "released".into(), out);
        }
        if self.state == State::Idle && utilisation >= threshold {
            let why = format!("utilisation {utilisation:.3} >= threshold {threshold}");
            self.enter(State::Decision, why, out);
            self.since = Some(now);
        }
        match self.state {
            State::Decision if utilisation < threshold => {
                let why = format!("utilisation {utilisation:.3} < threshold {threshold}");
                self.enter(State::Idle, why, out);
            }
            State::Decision if now - self.since.unwrap_or(now) >= hold => {
                let (min_bytes, min_rate) = (self.cfg.min_bytes, self.cfg.min_rate_bps);
                let eligible: Vec<u32> = candidates
                    .iter()
                    .filter(|c| {
                        !c.done && c.crosses && c.rate_bps >= min_rate && c.bytes_left.map_or(true, |b| b >= min_bytes)
                    })
                    .map(|c| c.flow)
                    .collect();
                if !eligible.is_empty() {
                    let why = format!(
                        "saturated (>= {threshold}) for {:.3} s; moving {} flow(s) to their alternative",
                        (now - self.since.unwrap_or(now)) as f64 / 1e9,
                        eligible.len()
                    );
                    self.enter(State::Action, why, out);
                    out.extend(eligible.iter().map(|&flow| Event::Move { flow }));
                    self.moved = eligible;
                }
            }
            State::Action if was == State::Action => self.step_action(now, utilisation, candidates, out),
            _ => {}
        }
    }

    fn step_action(&mut self, now: Nanos, utilisation: f64, candidates: &[Candidate], out: &mut Vec<Event>) {
        // A moved flow no longer among the candidates counts as done.
        let mine: Vec<&Candidate> = candidates.iter().filter(|c| self.moved.contains(&c.flow)).collect();
        let running: Vec<&Candidate> = mine.iter().copied().filter(|c| !c.done && !c.rerouted).collect();
        if running.is_empty() {
            let why = match mine.iter().filter(|c| c.rerouted).count() {
                0 => "the moved flows are done".to_string(),
                n if n == self.moved.len() => "a route event took the moved flows over".to_string(),
                n => format!("the moved flows are done or taken over by a route event ({n} of {})", self.moved.len()),
            };
            self.enter(State::Released, why, out);
            self.moved.clear();
            return;
        }
        let moved_rate: f64 = running.iter().map(|c| c.rate_bps).sum();
        let projected = utilisation + moved_rate / self.link_rate_bps;
        if projected >= self.cfg.release_threshold || running.iter().any(|c| c.held) {
            self.since = None;
            return;
        }
        let since = *self.since.get_or_insert(now);
        if now - since >= self.cfg.release_hold_ns {
            let why = format!(
                "utilisation {utilisation:.3} + moved flows {:.3} < release_threshold {} for {:.3} s",
                moved_rate / self.link_rate_bps,
                self.cfg.release_threshold,
                (now - since) as f64 / 1e9
            );
            let back: Vec<u32> = running.iter().map(|c| c.flow).collect();
            self.enter(State::Released, why, out);
            out.extend(back.into_iter().map(|flow| Event::MoveBack { flow }));
            self.moved.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;
    const MS: Nanos = 1_000_000;

    fn cfg() -> NotedConfig {
        serde_json::from_str::<ControllerConfig>(
            r#"{"kind": "noted", "link": "primary", "threshold": 0.9, "hold_ns": 2000000000,
                "release_threshold": 0.7, "release_hold_ns": 1000000000, "min_bytes": 1000,
                "min_rate_bps": 1000000, "alternatives": [{"flow": 0, "path": ["x"]}, {"flow": 1, "path": ["y"]}]}"#,
        )
        .map(|ControllerConfig::Noted(c)| c)
        .unwrap()
    }

    fn cand(flow: u32, rate_bps: f64, bytes_left: Option<u64>) -> Candidate {
        Candidate { flow, rate_bps, bytes_left, done: false, rerouted: false, crosses: true, held: false }
    }

    fn states(ev: &[Event]) -> Vec<State> {
        ev.iter().filter_map(|e| if let Event::State { state, .. } = e { Some(*state) } else { None }).collect()
    }

    /// Run samples every 100 ms from `from` to `to` with a fixed input;
    /// returns (time, event) pairs.
    fn run(n: &mut Noted, from: Nanos, to: Nanos, util: f64, c: &[Candidate]) -> Vec<(Nanos, Event)> {
        let mut all = vec![];
        let mut t = from;
        while t <= to {
            let mut out = vec![];
            n.step(t, util, c, &mut out);
            all.extend(out.into_iter().map(|e| (t, e)));
            t += 100 * MS;
        }
        all
    }

    #[test]
    fn config_parses_and_checks() {
        let c = cfg();
        c.check().unwrap();
        assert_eq!(c.alternatives[1].return_path, None);
        let e = NotedConfig { release_threshold: 0.95, ..c.clone() }.check().unwrap_err();
        assert!(e.contains("would flap"), "{e}");
        let e = NotedConfig { threshold: 0.0, ..c.clone() }.check().unwrap_err();
        assert!(e.contains("(0, 1]"), "{e}");
        let mut d = c.clone();
        d.alternatives[1].flow = 0;
        assert!(d.check().unwrap_err().contains("flow 0 given twice"));
        let bad = serde_json::from_str::<ControllerConfig>(r#"{"kind": "noted", "link": "x", "treshold": 1}"#);
        assert!(bad.unwrap_err().to_string().contains("treshold"));
    }

    #[test]
    fn acts_after_hold_and_releases_when_transfers_end() {
        let mut n = Noted::new(cfg(), 100_000_000);
        let big = [cand(0, 60e6, Some(1 << 30)), cand(1, 35e6, Some(1 << 30))];
        assert!(run(&mut n, 0, S, 0.5, &big).is_empty());
        // Saturated from 1.1 s: decision at once, action 2 s later.
        let ev = run(&mut n, S + 100 * MS, 3 * S + 50 * MS, 0.95, &big);
        assert_eq!(ev.len(), 1);
        assert_eq!((ev[0].0, states(&[ev[0].1.clone()])), (S + 100 * MS, vec![State::Decision]));
        let mut out = vec![];
        n.step(3 * S + 100 * MS, 0.95, &big, &mut out);
        assert_eq!(states(&out), vec![State::Action]);
        assert_eq!(&out[1..], &[Event::Move { flow: 0 }, Event::Move { flow: 1 }]);
        assert_eq!(n.moved(), &[0, 1]);
        // Moved: the link is quiet, but bringing them back would saturate it.
        assert!(run(&mut n, 3 * S + 200 * MS, 10 * S, 0.1, &big).is_empty());
        // Both finish: released, nothing to move back, then idle.
        let done = [Candidate { done: true, ..big[0] }, Candidate { done: true, ..big[1] }];
        let mut out = vec![];
        n.step(10 * S + 100 * MS, 0.1, &done, &mut out);
        assert_eq!(out, vec![Event::State { state: State::Released, why: "the moved flows are done".into() }]);
        let mut out = vec![];
        n.step(10 * S + 200 * MS, 0.1, &done, &mut out);
        assert_eq!(states(&out), vec![State::Idle]);
        assert_eq!(n.state(), State::Idle);
    }

    #[test]
    fn a_release_says_whether_route_events_took_the_moved_flows() {
        let why = |after: [Candidate; 2]| {
            let mut n = Noted::new(cfg(), 100_000_000);
            let big = [cand(0, 60e6, Some(1 << 30)), cand(1, 35e6, Some(1 << 30))];
            run(&mut n, 0, 3 * S + 100 * MS, 0.95, &big);
            assert_eq!(n.moved(), &[0, 1]);
            let mut out = vec![];
            n.step(3 * S + 200 * MS, 0.1, &after, &mut out);
            match &out[..] {
                [Event::State { state: State::Released, why }] => why.clone(),
                other => panic!("{other:?}"),
            }
        };
        let (done, taken) = (
            |f| Candidate { done: true, ..cand(f, 0.0, Some(0)) },
            |f| Candidate { rerouted: true, ..cand(f, 50e6, Some(1 << 30)) },
        );
        assert_eq!(why([taken(0), taken(1)]), "a route event took the moved flows over");
        assert_eq!(why([done(0), taken(1)]), "the moved flows are done or taken over by a route event (1 of 2)");
        assert_eq!(why([done(0), done(1)]), "the moved flows are done");
    }

    #[test]
    fn a_dip_resets_the_hold_and_small_flows_are_not_moved() {
        let mut n = Noted::new(cfg(), 100_000_000);
        // Only small or slow transfers: decision but no action.
        let small = [cand(0, 60e6, Some(10)), cand(1, 0.5e6, Some(1 << 30))];
        let ev = run(&mut n, 0, 5 * S, 0.95, &small);
        assert_eq!(states(&ev.iter().map(|e| e.1.clone()).collect::<Vec<_>>()), vec![State::Decision]);
        // A dip below the threshold: idle; the hold restarts.
        let mut out = vec![];
        n.step(5 * S + 100 * MS, 0.5, &small, &mut out);
        assert_eq!(states(&out), vec![State::Idle]);
        let big = [cand(0, 60e6, Some(1 << 30)), cand(1, 30e6, None)];
        let ev = run(&mut n, 5 * S + 200 * MS, 7 * S + 100 * MS, 0.95, &big);
        assert_eq!(ev.len(), 1, "{ev:?}");
        let ev = run(&mut n, 7 * S + 200 * MS, 7 * S + 200 * MS, 0.95, &big);
        assert_eq!(ev[0].0, 7 * S + 200 * MS);
        // A bulk flow (no byte count) is eligible by its rate.
        assert_eq!(ev[1..].iter().map(|e| e.1.clone()).collect::<Vec<_>>(), vec![Event::Move { flow: 0 }, Event::Move { flow: 1 }]);
    }

    #[test]
    fn releases_on_projected_load_with_hold_then_can_act_again() {
        let mut n = Noted::new(cfg(), 100_000_000);
        let c = [cand(0, 20e6, Some(1 << 30)), cand(1, 20e6, Some(1 << 30))];
        run(&mut n, 0, 2 * S, 0.95, &c);
        assert_eq!(n.state(), State::Action);
        // 0.35 + 0.4 = 0.75 >= 0.7: stays.
        assert!(run(&mut n, 2 * S + 100 * MS, 4 * S, 0.35, &c).is_empty());
        // 0.25 + 0.4 = 0.65 < 0.7 from 4.1 s, for 1 s: released at 5.1 s.
        let ev = run(&mut n, 4 * S + 100 * MS, 5 * S + 100 * MS, 0.25, &c);
        assert_eq!(ev.len(), 3, "{ev:?}");
        assert!(ev.iter().all(|e| e.0 == 5 * S + 100 * MS));
        assert_eq!(states(&[ev[0].1.clone()]), vec![State::Released]);
        assert_eq!((ev[1].1.clone(), ev[2].1.clone()), (Event::MoveBack { flow: 0 }, Event::MoveBack { flow: 1 }));
        assert!(n.moved().is_empty());
        // Released → idle, and straight to decision when saturated again.
        let mut out = vec![];
        n.step(5 * S + 200 * MS, 0.95, &c, &mut out);
        assert_eq!(states(&out), vec![State::Idle, State::Decision]);
        // A zero hold acts in the same step as the decision.
        let mut z = Noted::new(NotedConfig { hold_ns: 0, ..cfg() }, 100_000_000);
        let mut out = vec![];
        z.step(0, 0.95, &c, &mut out);
        assert_eq!(states(&out), vec![State::Decision, State::Action]);
    }

    #[test]
    fn a_flow_held_by_its_alternative_is_not_released_by_load_and_one_off_the_link_is_not_moved() {
        // One bulk flow alone on the watched link: moved to a narrower
        // alternative, which it fills; the watched link is then idle and its
        // rate there (0.2 of the link) projects below release_threshold, but
        // back it would fill the link again: held, it stays (it flapped).
        let mut n = Noted::new(cfg(), 100_000_000);
        let on = [cand(0, 95e6, None)];
        run(&mut n, 0, 2 * S, 0.95, &on);
        assert_eq!(n.moved(), &[0]);
        let held = [Candidate { rate_bps: 20e6, crosses: false, held: true, ..on[0] }];
        assert!(run(&mut n, 2 * S + 100 * MS, 10 * S, 0.0, &held).is_empty());
        assert_eq!(n.state(), State::Action);
        // The alternative has room (its rate is its demand): released after the hold.
        let free = [Candidate { held: false, ..held[0] }];
        let ev = run(&mut n, 10 * S + 100 * MS, 11 * S + 100 * MS, 0.0, &free);
        assert_eq!(ev.iter().map(|e| e.1.clone()).filter(|e| matches!(e, Event::MoveBack { .. })).count(), 1);
        // held_by: only the links the move added count (threshold 0.9)
        let util = |l: u32| [0.95, 0.2, 0.99][l as usize];
        assert!(n.held_by([0u32, 1], &[2], util) && !n.held_by([0u32, 1], &[0], util));
        // A candidate an event took off the watched link: saturated, but nothing to move.
        let mut n = Noted::new(cfg(), 100_000_000);
        let off = [Candidate { crosses: false, ..cand(0, 40e6, Some(1 << 30)) }];
        let ev = run(&mut n, 0, 5 * S, 0.95, &off);
        assert_eq!(states(&ev.iter().map(|e| e.1.clone()).collect::<Vec<_>>()), vec![State::Decision]);
    }
}
