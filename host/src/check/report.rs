//! Writing a [`CheckReport`] for a person (`check.txt`) and for a program (`check.json`, written
//! by hand: numbers that are not finite become `null`).

use std::fmt::Write as _;

use super::{Budget, CaseResult, CheckReport, Comparison, Figures, Throughput};

pub(super) fn text(r: &CheckReport) -> String {
    let mut s = String::new();
    let scales: Vec<String> = r.scales.iter().map(|k| format!("x{k}")).collect();
    let _ = writeln!(
        s,
        "umd check: device {} (target {}) against the reference {}",
        r.device, r.target, r.reference
    );
    let _ = writeln!(
        s,
        "seeds {}, scales {}, took {:.1} s\n",
        r.seeds,
        scales.join(" "),
        r.elapsed.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "correctness: {} cases, {} passed, {} failed; {} variants skipped (their plugin declined \
         them for cpu)",
        r.cases.len(),
        r.cases.len() - r.failed(),
        r.failed(),
        r.skipped
    );
    for c in &r.cases {
        let verdict = if c.passed() { "PASS" } else { "FAIL" };
        let tolerance = if c.tolerance == 0.0 {
            "exact".to_string()
        } else {
            format!("tolerance {:.0e}", c.tolerance)
        };
        let _ = writeln!(
            s,
            "  {verdict}  max error {:.2e} ({tolerance})  {}",
            c.max_error, c.name
        );
        if let Some(why) = &c.failure {
            let _ = writeln!(s, "        {why}");
        }
    }
    list(
        &mut s,
        "declined on the device (planned for cpu)",
        &r.declined_on_device
            .iter()
            .map(|(n, why)| format!("{n}: {why}"))
            .collect::<Vec<_>>(),
    );
    list(&mut s, "ops not checked", &r.uncovered);
    let _ = writeln!(s, "\nfigures (DESIGN §6): {}", r.figures_note);
    if let Some(f) = &r.figures {
        figures_text(&mut s, f);
    }
    let _ = writeln!(
        s,
        "\nresult: {}",
        if r.passed() {
            "PASS".to_string()
        } else {
            format!("FAIL ({} of {} cases)", r.failed(), r.cases.len())
        }
    );
    s
}

fn list(s: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        let _ = writeln!(s, "{title}: none");
    } else {
        let _ = writeln!(s, "{title}:");
        items.iter().for_each(|i| {
            let _ = writeln!(s, "  {i}");
        });
    }
}

fn figures_text(s: &mut String, f: &Figures) {
    let _ = writeln!(s, "  GPU: {}", f.gpu);
    let rows: [(&str, &Result<Comparison, String>); 3] = [
        ("host cost per launch", &f.launch),
        ("allocator hit", &f.alloc),
        ("Add bandwidth, 256 MiB", &f.add_bandwidth),
    ];
    for (what, r) in rows {
        let line = match r {
            Ok(c) => {
                let budget = match c.budget {
                    Budget::RatioAtMost(b) => format!("ratio ≤ {b}"),
                    Budget::RatioAtLeast(b) => format!("ratio ≥ {b}"),
                    Budget::ValueAtMost(b) => format!("≤ {b} {}", c.unit),
                };
                let ok = if c.within_budget() {
                    "OK"
                } else {
                    "OVER BUDGET"
                };
                format!(
                    "{:.3} {unit} ({}, {} runs) vs {:.3} {unit} ({}, {} runs): ratio {:.3}; \
                     budget {budget}: {ok}",
                    c.umd,
                    c.umd_path,
                    c.iterations.0,
                    c.baseline,
                    c.baseline_path,
                    c.iterations.1,
                    c.ratio,
                    unit = c.unit,
                )
            }
            Err(e) => format!("not measured: {e}"),
        };
        let _ = writeln!(s, "  {what}: {line}");
    }
    let line = match &f.matmul {
        Ok(t) => format!(
            "{:.2} {} ({} runs, {:.2} ms each)",
            t.value,
            t.unit,
            t.iterations,
            t.seconds_each * 1e3
        ),
        Err(e) => format!("not measured: {e}"),
    };
    let _ = writeln!(s, "  MatMul f32 4096x4096x4096: {line}");
}

/// A JSON string literal.
pub fn esc(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON number, or `null` when not finite.
pub fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v:?}")
    } else {
        "null".into()
    }
}

fn strings(items: impl IntoIterator<Item = String>) -> String {
    let items: Vec<String> = items.into_iter().map(|i| esc(&i)).collect();
    format!("[{}]", items.join(", "))
}

fn case_json(c: &CaseResult) -> String {
    format!(
        "{{\"name\": {}, \"plugin\": {}, \"op\": {}, \"inputs\": {}, \"source\": {}, \
         \"scale\": {}, \"seeds\": {}, \"passed\": {}, \"max_error\": {}, \"tolerance\": {}, \
         \"failure\": {}}}",
        esc(&c.name),
        esc(&c.plugin),
        esc(&c.op),
        strings(c.inputs.iter().map(|t| t.to_string())),
        esc(&c.source),
        c.scale,
        c.seeds,
        c.passed(),
        num(c.max_error),
        num(c.tolerance),
        c.failure.as_deref().map_or("null".into(), esc)
    )
}

fn comparison_json(r: &Result<Comparison, String>) -> String {
    let c = match r {
        Ok(c) => c,
        Err(e) => return format!("{{\"error\": {}}}", esc(e)),
    };
    let (kind, bound) = match c.budget {
        Budget::RatioAtMost(b) => ("ratio_at_most", b),
        Budget::RatioAtLeast(b) => ("ratio_at_least", b),
        Budget::ValueAtMost(b) => ("value_at_most", b),
    };
    format!(
        "{{\"unit\": {}, \"umd_path\": {}, \"umd\": {}, \"baseline_path\": {}, \"baseline\": {}, \
         \"ratio\": {}, \"budget\": {{\"kind\": \"{kind}\", \"bound\": {}}}, \
         \"within_budget\": {}, \"iterations\": [{}, {}]}}",
        esc(c.unit),
        esc(c.umd_path),
        num(c.umd),
        esc(c.baseline_path),
        num(c.baseline),
        num(c.ratio),
        num(bound),
        c.within_budget(),
        c.iterations.0,
        c.iterations.1
    )
}

fn throughput_json(r: &Result<Throughput, String>) -> String {
    match r {
        Ok(t) => format!(
            "{{\"unit\": {}, \"value\": {}, \"iterations\": {}, \"seconds_each\": {}}}",
            esc(t.unit),
            num(t.value),
            t.iterations,
            num(t.seconds_each)
        ),
        Err(e) => format!("{{\"error\": {}}}", esc(e)),
    }
}

fn figures_json(f: &Figures) -> String {
    format!(
        "{{\n    \"gpu\": {},\n    \"launch\": {},\n    \"alloc\": {},\n    \
         \"add_bandwidth\": {},\n    \"matmul\": {}\n  }}",
        esc(&f.gpu),
        comparison_json(&f.launch),
        comparison_json(&f.alloc),
        comparison_json(&f.add_bandwidth),
        throughput_json(&f.matmul)
    )
}

pub(super) fn json(r: &CheckReport) -> String {
    let cases: Vec<String> = r
        .cases
        .iter()
        .map(|c| format!("    {}", case_json(c)))
        .collect();
    let declined: Vec<String> = r
        .declined_on_device
        .iter()
        .map(|(n, why)| format!("{{\"name\": {}, \"reason\": {}}}", esc(n), esc(why)))
        .collect();
    let scales: Vec<String> = r.scales.iter().map(u64::to_string).collect();
    format!(
        "{{\n  \"device\": {},\n  \"target\": {},\n  \"reference\": {},\n  \"seeds\": {},\n  \
         \"scales\": [{}],\n  \"passed\": {},\n  \"cases_failed\": {},\n  \"skipped\": {},\n  \
         \"declined_on_device\": [{}],\n  \"uncovered\": {},\n  \"cases\": [\n{}\n  ],\n  \
         \"figures\": {},\n  \"figures_note\": {},\n  \"elapsed_s\": {}\n}}\n",
        esc(&r.device),
        esc(&r.target),
        esc(&r.reference),
        r.seeds,
        scales.join(", "),
        r.passed(),
        r.failed(),
        r.skipped,
        declined.join(", "),
        strings(r.uncovered.iter().cloned()),
        cases.join(",\n"),
        r.figures.as_ref().map_or("null".into(), figures_json),
        esc(&r.figures_note),
        num(r.elapsed.as_secs_f64())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_and_numbers() {
        assert_eq!(esc("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\u0001""#);
        assert_eq!(esc("x7 µs"), "\"x7 µs\"");
        assert_eq!(num(1e-5), "1e-5");
        assert_eq!(num(0.0), "0.0");
        assert_eq!(num(f64::NAN), "null");
        assert_eq!(num(f64::INFINITY), "null");
    }
}
