//! Probe files (`probes/*.yaml`, one probe or a list) and the prompt files they name.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jiff::tz::TimeZone;

use super::gate::{self, Relative, Similarity, Slo, VsBaseline};
use serde_saphyr::Spanned;

use super::cache_check::{self, CacheCheck};
use super::confirm::{self, Confirm};
use super::duration::Dur;
use super::ladder::{self, Ladder};
use super::prompt::Prompt;
use super::raw::{self, CacheBust, EverySpec, Inconclusive, Message, RawProbe, Role, ScheduleSpec};
use super::{positive, probe_files, read, ConfigError, FieldPath, Source, Target};
use crate::checks::tool_call::Tool;
use crate::checks::CheckSpec;
use crate::probe::flavor::PrefixCache;
use crate::schedule::Schedule;

#[derive(Debug, Clone)]
pub struct Probe {
    pub name: String,
    pub file: PathBuf,
    /// `schedule:` or `every:`; none: the probe runs only when asked (`once`, `gate`, `/probe`).
    pub schedule: Option<Schedule>,
    pub timezone: TimeZone,
    pub jitter: Duration,
    pub targets: Vec<String>,
    pub prompt: Arc<Prompt>,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub cache_bust: CacheBust,
    /// The functions offered to the model (`tools:`), sent with every request.
    pub tools: Option<Arc<[Tool]>>,
    pub timeouts: Timeouts,
    pub checks: CheckSpec,
    pub gate: GateSpec,
    /// How the daemon re-runs a failed pair before its next scheduled run.
    pub confirm: Confirm,
    /// Objectives for this probe's runs, on each target it runs on (`slo:`).
    pub slo: Option<super::Slo>,
    /// Each firing checks the target's prefix cache: the prompt twice, cold then warm.
    pub cache_check: Option<CacheCheck>,
    /// The context-length ladder: one run per rung each firing.
    pub ladder: Option<Ladder>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    pub ttft: Duration,
    pub stall: Duration,
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(3),
            ttft: Duration::from_secs(10),
            stall: Duration::from_secs(5),
            total: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct GateSpec {
    /// A fixed number of samples per side (bootstrap intervals), as `--samples` sets it.
    pub samples: Option<u32>,
    /// The sequential gate's cap per side, as `--max-samples` sets it.
    pub max_samples: Option<u32>,
    pub slo: Vec<Slo>,
    pub vs_baseline: Vec<Relative>,
    /// `answer_similarity_pNN` limits from `vs_baseline:`.
    pub answer_similarity: Vec<Similarity>,
    pub inconclusive: Inconclusive,
}

impl GateSpec {
    /// Whether any limit needs a baseline.
    pub fn compares(&self) -> bool {
        !self.vs_baseline.is_empty() || !self.answer_similarity.is_empty()
    }
}

fn probe_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| ConfigError::file(dir, format!("cannot read the probes folder: {e}")))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
        .collect();
    files.sort();
    Ok(files)
}

/// A probe file holds one mapping or a list of them; the first content line tells which.
fn is_list(text: &str) -> bool {
    text.lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#') && *l != "---")
        .is_some_and(|l| l == "-" || l.starts_with("- "))
}

pub(super) fn load_all(
    probes_dir: &Path,
    prompts_dir: &Path,
    base: &Path,
    targets: &[Arc<Target>],
    unrecorded_ok: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<Arc<Probe>>, ConfigError> {
    let mut prompts: HashMap<String, Arc<Prompt>> = HashMap::new();
    let mut probes: Vec<Arc<Probe>> = Vec::new();
    for file in probe_files(probes_dir)? {
        let text = read(&file)?;
        let src = Source {
            path: &file,
            text: &text,
        };
        let list = is_list(&text);
        let raws: Vec<RawProbe> = if list {
            src.parse()?
        } else {
            vec![src.parse()?]
        };
        for (i, r) in raws.into_iter().enumerate() {
            let at = if list {
                FieldPath::root().index(i)
            } else {
                FieldPath::root()
            };
            if probes.iter().any(|p| p.name == r.name.value) {
                return Err(src.err(
                    &at.key("name"),
                    r.name.referenced,
                    format!("duplicate probe name {:?}", r.name.value),
                ));
            }
            let dirs = Dirs {
                prompts: prompts_dir,
                base,
                unrecorded_ok,
            };
            let p = load_probe(&src, &at, r, &dirs, &mut prompts, targets, warnings)?;
            probes.push(Arc::new(p));
        }
    }
    Ok(probes)
}

/// The prompt file named by the `prompt` key at `field`.
fn load_prompt(
    src: &Source,
    field: &FieldPath,
    name: &Spanned<String>,
    dir: &Path,
) -> Result<Prompt, ConfigError> {
    let path = dir.join(&name.value);
    let text = std::fs::read_to_string(&path).map_err(|_| {
        src.err(
            field,
            name.referenced,
            format!("prompt file {} not found", path.display()),
        )
    })?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("txt") => {
            if text.trim().is_empty() {
                return Err(src.err(
                    field,
                    name.referenced,
                    format!("prompt file {} is empty", path.display()),
                ));
            }
            Ok(Prompt::user(&name.value, text.trim_end()))
        }
        Some("yaml" | "yml") => {
            let psrc = Source {
                path: &path,
                text: &text,
            };
            let messages: Vec<Message> = psrc.parse()?;
            if !messages.iter().any(|m| m.role == Role::User) {
                return Err(ConfigError::file(
                    &path,
                    "a prompt needs at least one user message",
                ));
            }
            Ok(Prompt {
                name: name.value.clone(),
                messages,
            })
        }
        _ => Err(src.err(
            field,
            name.referenced,
            "a prompt file must end in .txt (one user message) or .yaml (chat messages)",
        )),
    }
}

/// Where a probe's files are: prompts in the prompts folder, schemas and tools relative to the
/// agent file's folder.
struct Dirs<'a> {
    prompts: &'a Path,
    base: &'a Path,
    /// A `checks.reference` file not written yet is no error (`record` is about to write it).
    unrecorded_ok: bool,
}

/// One probe of a probe file, its sections read in the order their errors are reported.
fn load_probe(
    src: &Source,
    at: &FieldPath,
    r: RawProbe,
    dirs: &Dirs,
    prompts: &mut HashMap<String, Arc<Prompt>>,
    targets: &[Arc<Target>],
    warnings: &mut Vec<String>,
) -> Result<Probe, ConfigError> {
    super::check_name(src, &at.key("name"), &r.name, "probe")?;
    let name = r.name.value.clone();
    let timezone = super::time_zone(src, &at.key("timezone"), r.timezone.as_ref())?;
    let (target_names, on) = runs_on(src, at, r.targets.as_deref(), targets)?;
    let prompt = r
        .prompt
        .as_ref()
        .map(|p| named_prompt(src, &at.key("prompt"), p, dirs.prompts, prompts))
        .transpose()?;
    let max_tokens = match &r.max_tokens {
        Some(m) => positive(src, at, "max_tokens", m, 1 << 20)? as u32,
        None => 128,
    };
    let temperature = temperature(src, at, r.temperature.as_ref())?;
    let timeouts = load_timeouts(src, &at.key("timeouts"), r.timeouts.unwrap_or_default())?;
    let tools = r
        .tools
        .as_ref()
        .map(|file| load_tools(src, &at.key("tools"), file, dirs.base, &on))
        .transpose()?;
    let checks = load_checks(
        src,
        &at.key("checks"),
        r.checks.unwrap_or_default(),
        (dirs.base, dirs.unrecorded_ok),
        tools.as_deref(),
    )?;
    let gated = r.gate.is_some();
    let gate = load_gate(src, &at.key("gate"), r.gate, temperature)?;
    let confirm = confirm::load(src, &at.key("confirm"), r.confirm)?;
    let slo = r
        .slo
        .map(|s| super::slo::load_slo(src, &at.key("slo"), s))
        .transpose()?;
    let schedule = schedule(src, at, r.schedule, r.every)?;
    let cache_check = cache_check::load(
        src,
        &at.key("cache_check"),
        r.cache_check,
        r.cache_bust.is_some(),
    )?;
    let ladder = match &r.ladder {
        Some(l) => {
            let around = (prompt.as_deref(), gated, cache_check.is_some());
            Some(load_ladder(src, &at.key("ladder"), l, &checks, around)?)
        }
        None => None,
    };
    let prompt = prompt_or_needle(src, &at.key("prompt"), prompt, ladder.as_ref(), &r.name)?;
    let cache_bust = r.cache_bust.unwrap_or_default();
    if cache_bust == CacheBust::Auto && cache_check.is_none() {
        warnings.extend(on.iter().filter_map(|t| uncached(&name, t)));
    }
    Ok(Probe {
        name,
        file: src.path.to_path_buf(),
        schedule,
        timezone,
        jitter: r.jitter.map_or(Duration::ZERO, |j| j.0),
        targets: target_names,
        prompt,
        max_tokens,
        temperature,
        cache_bust,
        tools,
        timeouts,
        checks,
        gate,
        confirm,
        slo,
        cache_check,
        ladder,
    })
}

/// `targets:`: the names the probe runs on (every target's when it names none), and those
/// targets.
fn runs_on<'t>(
    src: &Source,
    at: &FieldPath,
    list: Option<&[Spanned<String>]>,
    targets: &'t [Arc<Target>],
) -> Result<(Vec<String>, Vec<&'t Arc<Target>>), ConfigError> {
    let names: Vec<String> = match list {
        Some(list) => super::target_names(src, &at.key("targets"), list, targets)?,
        None => targets.iter().map(|t| t.name.clone()).collect(),
    };
    let on = targets.iter().filter(|t| names.contains(&t.name)).collect();
    Ok((names, on))
}

/// `prompt:`: the prompt file, read once however many probes name it.
fn named_prompt(
    src: &Source,
    field: &FieldPath,
    name: &Spanned<String>,
    dir: &Path,
    prompts: &mut HashMap<String, Arc<Prompt>>,
) -> Result<Arc<Prompt>, ConfigError> {
    if let Some(p) = prompts.get(&name.value) {
        return Ok(p.clone());
    }
    let p = Arc::new(load_prompt(src, field, name, dir)?);
    prompts.insert(name.value.clone(), p.clone());
    Ok(p)
}

/// `temperature:`, between 0 and 2.
fn temperature(
    src: &Source,
    at: &FieldPath,
    t: Option<&Spanned<f64>>,
) -> Result<Option<f64>, ConfigError> {
    match t {
        Some(t) if !(0.0..=2.0).contains(&t.value) => Err(src.err(
            &at.key("temperature"),
            t.referenced,
            format!("temperature must be between 0 and 2, found {}", t.value),
        )),
        Some(t) => Ok(Some(t.value)),
        None => Ok(None),
    }
}

/// `schedule:` (cron) or `every:` (an interval), not both; neither: the probe runs when asked.
fn schedule(
    src: &Source,
    at: &FieldPath,
    schedule: Option<Spanned<ScheduleSpec>>,
    every: Option<Spanned<EverySpec>>,
) -> Result<Option<Schedule>, ConfigError> {
    match (schedule, every) {
        (Some(_), Some(every)) => Err(src.err(
            &at.key("every"),
            every.referenced,
            "schedule and every both say when the probe runs: keep one",
        )),
        (Some(s), None) => Ok(Some(s.value.0)),
        (None, e) => Ok(e.map(|e| e.value.0)),
    }
}

/// `ladder:` at `field`, around the probe's prompt, whether it is gated and whether it checks
/// the cache: a ladder takes neither `cache_check` nor `checks.reference`, and its needle's
/// answer is no JSON nor tool call.
fn load_ladder(
    src: &Source,
    field: &FieldPath,
    l: &Spanned<ladder::RawLadder>,
    checks: &CheckSpec,
    (prompt, gated, cache_checked): (Option<&Prompt>, bool, bool),
) -> Result<Ladder, ConfigError> {
    if cache_checked {
        return Err(src.err(
            field,
            l.referenced,
            "a probe takes cache_check or ladder, not both: each turns a firing into runs of its own",
        ));
    }
    if checks.reference.is_some() {
        return Err(src.err(
            field,
            l.referenced,
            "a probe takes ladder or checks.reference, not both: a ladder's prompts change each firing, so no one answer is right",
        ));
    }
    let answer_shape = if checks.tool_call.is_some() {
        Some("tool_call")
    } else if checks.json {
        Some("json")
    } else {
        None
    };
    let around = ladder::Around {
        prompt,
        answer_shape,
        gated,
    };
    ladder::load(src, field, l, around)
}

/// The probe's prompt. Without one, only a needle ladder will do: it writes its own prompt
/// (after the probe's messages when it has some), so the probe's is empty.
fn prompt_or_needle(
    src: &Source,
    field: &FieldPath,
    prompt: Option<Arc<Prompt>>,
    ladder: Option<&Ladder>,
    name: &Spanned<String>,
) -> Result<Arc<Prompt>, ConfigError> {
    match prompt {
        Some(p) => Ok(p),
        None if ladder.is_some_and(|l| l.needle) => Ok(Arc::new(Prompt {
            name: String::new(),
            messages: Vec::new(),
        })),
        None => Err(src.err(
            field,
            name.referenced,
            "a probe needs a prompt (only a ladder with a needle writes its own)",
        )),
    }
}

/// `tools:`, the OpenAI function definitions offered to the model: a completions target takes
/// none.
fn load_tools(
    src: &Source,
    field: &FieldPath,
    file: &Spanned<String>,
    base: &Path,
    on: &[&Arc<Target>],
) -> Result<Arc<[Tool]>, ConfigError> {
    let tools = probe_files::tools(&base.join(&file.value))
        .map_err(|e| src.err(field, file.referenced, e))?;
    if let Some(t) = on.iter().find(|t| !t.api.flavor().takes_tools()) {
        return Err(src.err(
            field,
            file.referenced,
            format!(
                "target {:?} speaks {}, which takes no tools",
                t.name,
                t.api.as_str()
            ),
        ));
    }
    Ok(Arc::from(tools))
}

/// Why `cache_bust: auto` cannot keep a prefix cache from answering for `probe` on `t`, when
/// it cannot: the server kind honours no cache-busting field on that API.
fn uncached(probe: &str, t: &Target) -> Option<String> {
    match t.api.flavor().prefix_cache() {
        // Nothing is cached that the probe does not mark: there is no cache to defeat.
        PrefixCache::Marked => return None,
        PrefixCache::Provider => return Some(format!(
            "probe {probe:?} on target {:?}: the hosted API `{}` caches long prompts on the provider's side and offers no field to skip it, so `cache_bust: auto` sends only `Cache-Control: no-cache` (use `cache_bust: prefix` to defeat it)",
            t.name,
            t.api.as_str()
        )),
        PrefixCache::Server { .. } => {}
    }
    t.server.cache_bust_field(t.api).is_none().then(|| format!(
        "probe {probe:?} on target {:?}: server kind `{}` honours no cache-busting field on {}, so `cache_bust: auto` sends only `Cache-Control: no-cache`; a prefix cache may still answer (use `cache_bust: prefix` to defeat it)",
        t.name,
        t.server.as_str(),
        t.api.as_str()
    ))
}

/// What is written, else the default; never zero, and no longer than the total, which would
/// always fire first. A default the user did not write shrinks to their total instead.
fn load_timeouts(
    src: &Source,
    at: &FieldPath,
    t: raw::RawTimeouts,
) -> Result<Timeouts, ConfigError> {
    let written = |v: &Option<Spanned<Dur>>, key: &str| match v {
        Some(s) if s.value.0.is_zero() => Err(src.err(
            &at.key(key),
            s.referenced,
            format!("{key} must be longer than zero"),
        )),
        Some(s) => Ok(Some((s.value.0, s.referenced))),
        None => Ok(None),
    };
    let d = Timeouts::default();
    let total = written(&t.total, "total")?.map_or(d.total, |(v, _)| v);
    let within_total =
        |v: &Option<Spanned<Dur>>, key: &str, default: Duration| match written(v, key)? {
            Some((v, loc)) if v > total => Err(src.err(
                &at.key(key),
                loc,
                format!(
                    "{key} {} is longer than total {}{}, which would always time out first",
                    for_people(v),
                    for_people(total),
                    if t.total.is_none() {
                        " (the default)"
                    } else {
                        ""
                    },
                ),
            )),
            Some((v, _)) => Ok(v),
            None => Ok(default.min(total)),
        };
    Ok(Timeouts {
        connect: within_total(&t.connect, "connect", d.connect)?,
        ttft: within_total(&t.ttft, "ttft", d.ttft)?,
        stall: within_total(&t.stall, "stall", d.stall)?,
        total,
    })
}

/// `1m 30s`, `700ms`: jiff's friendly format, the one durations are written in.
fn for_people(d: Duration) -> String {
    jiff::SignedDuration::try_from(d).map_or_else(|_| format!("{d:?}"), |s| format!("{s:#}"))
}

fn load_gate(
    src: &Source,
    at: &FieldPath,
    g: Option<raw::RawGate>,
    temperature: Option<f64>,
) -> Result<GateSpec, ConfigError> {
    let Some(g) = g else {
        return Ok(GateSpec::default());
    };
    let samples = match &g.samples {
        Some(s) => Some(positive(src, at, "samples", s, 100_000)? as u32),
        None => None,
    };
    let max_samples = match &g.max_samples {
        Some(s) => Some(positive(src, at, "max_samples", s, 100_000)? as u32),
        None => None,
    };
    if let (Some(_), Some(m)) = (&g.samples, &g.max_samples) {
        return Err(src.err(
            &at.key("max_samples"),
            m.referenced,
            "samples (a fixed number) and max_samples (the sequential gate's cap) exclude each other: keep one",
        ));
    }
    let mut slo = Vec::new();
    let slo_field = at.key("slo");
    for (k, v) in g.slo.unwrap_or_default() {
        let limit = gate::parse_slo(&k, &v.value.0);
        slo.push(limit.map_err(|e| src.err(&slo_field.key(&k), v.referenced, e))?);
    }
    let (mut vs_baseline, mut answer_similarity) = (Vec::new(), Vec::new());
    let relative_field = at.key("vs_baseline");
    for (k, v) in g.vs_baseline.unwrap_or_default() {
        let limit = gate::parse_vs_baseline(&k, &v.value.0)
            .map_err(|e| src.err(&relative_field.key(&k), v.referenced, e))?;
        match limit {
            VsBaseline::Relative(r) => vs_baseline.push(r),
            VsBaseline::Similarity(_) if temperature != Some(0.0) => {
                return Err(src.err(
                    &relative_field.key(&k),
                    v.referenced,
                    format!("{k} compares answers that only repeat at temperature 0: set the probe's temperature: 0"),
                ))
            }
            VsBaseline::Similarity(s) => answer_similarity.push(s),
        }
    }
    Ok(GateSpec {
        samples,
        max_samples,
        slo,
        vs_baseline,
        answer_similarity,
        inconclusive: g.inconclusive.unwrap_or_default(),
    })
}

mod checks;
use checks::load_checks;

#[cfg(test)]
mod tests;
