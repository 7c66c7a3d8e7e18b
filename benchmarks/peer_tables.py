"""Render the peer benchmark records (bench_peers_nt.py, bench_kernel_engine.py, bench_peers_torch.py) as Markdown tables and write them
into BENCHMARKS.md between marker comments, so the numbers there are the ones measured, not copied by hand.

    python benchmarks/run_all.py peers --markdown   # run both peers, then update BENCHMARKS.md
    python benchmarks/peer_tables.py results/latest.json   # update BENCHMARKS.md from an earlier run

Each table replaces the text between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->`` in
BENCHMARKS.md (NAME = peers_nt, kernel_engine or peers_torch); the prose around them is written by hand.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS_MD = HERE.parent / "BENCHMARKS.md"
TARGET = "P1000_L200"


def _s(t: float) -> str:
    return f"{t:.2g} s" if t < 0.1 else f"{t:.3g} s"


def _provenance(rec: dict, machine: dict) -> str:
    # the script's own commit (run_all keeps it: a commit made while run_all ran differs from the run's start)
    commit = rec.get("resprop_commit", machine.get("resprop_commit", "?"))
    dirty = " + uncommitted changes" if rec.get("resprop_sources_dirty", machine.get("resprop_sources_dirty")) else ""
    when = f" {rec['timestamp']}" if rec.get("timestamp") else ""
    return (f"_Measured{when} on {machine.get('processor', '?')}, {machine.get('cpu_count', '?')} cores, "
            f"resprop {commit}{dirty}; script wall time {rec['script_wall_s']:.0f} s._")


def peers_nt_table(rec: dict, machine: dict) -> str:
    """Markdown table of bench_peers_nt.py: times, speed-ups and agreement per configuration; P = 1000, L = 200
    (the issue-5 target) in bold."""
    head = ("| config | resprop f64 | NT f32 warm | NT f32 first call | NT f64 warm | NT f64 first call "
            "| NT f32 / resprop | NT f64 / resprop | max rel. diff vs NT f64 (off-diag.) | (diag.) |\n"
            "|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for key, o in rec["results"].items():
        act, P, L, get = key.split("_")
        bold = (lambda x: f"**{x}**") if f"{P}_{L}" == TARGET else (lambda x: x)
        rows.append("| " + " | ".join([
            bold(f"{act} P={P[1:]} L={L[1:]} {get.upper()}"), bold(_s(o["resprop"]["best_s"])),
            _s(o["nt_f32"]["best_s"]), _s(o["nt_f32"]["first_call_s"]), _s(o["nt_f64"]["best_s"]),
            _s(o["nt_f64"]["first_call_s"]), bold(f"{o['ratio_nt_f32_over_resprop']:.1f}×"),
            f"{o['ratio_nt_f64_over_resprop']:.1f}×", bold(f"{o['max_rel_err_vs_nt_f64_offdiag']:.1e}"),
            f"{o['max_rel_err_vs_nt_f64_diag']:.1e}"]) + " |")
    targets = "; ".join(f"{k}: {t['speedup_vs_nt_f32']:.1f}× ({'met' if t['speed_met'] else 'NOT met'}), "
                        f"{t['max_rel_err_vs_nt_f64']:.1e} ({'met' if t['agree_met'] else 'NOT met'})"
                        for k, t in rec["targets"].items())
    return "\n".join([_provenance(rec, machine), "", head, *rows, "",
                      f"Targets at P = 1000, L = 200 (≥ 3× NT float32 warm, ≤ 1e-12 vs NT float64): {targets}."])


def peers_torch_table(rec: dict, machine: dict) -> str:
    """Markdown table of bench_peers_torch.py."""
    p, t, r = rec["params"], rec["torch"], rec["resprop_reduced"]
    head = ("| implementation | best time | per sample | layer·neuron·samples / s | E[G] | Var[G] |\n"
            "|---|---|---|---|---|---|")
    rows = [f"| {name} | {_s(o['best_s'])} | {1e3 * o['best_s'] / p['samples']:.3g} ms | "
            f"{o['throughput_layer_neuron_samples_per_s']:.2e} | {o['mean_G']:.3f} ± {o['mean_G_se']:.3f} | "
            f"{o['var_G']:.2f} ± {o['var_G_se']:.2f} |"
            for name, o in ((f"PyTorch {t['version']} dense `bmm`, {t['threads']} threads", t),
                            ("resprop reduced path (NumPy)", r))]
    verdict = (f"n = {p['n']}, d = {p['d']}, {p['samples']} samples each. Reduced / dense torch: "
               f"**{rec['ratio_reduced_over_torch']:.0f}×** (target ≥ 50×: {'met' if rec['target_met'] else 'NOT met'}); "
               f"E[G] z = {rec['mean_G_z']:+.2f}, Var[G] z = {rec['var_G_z']:+.2f}.")
    return "\n".join([_provenance(rec, machine), "", head, *rows, "", verdict])


def kernel_engine_table(rec: dict, machine: dict) -> str:
    """Markdown tables of bench_kernel_engine.py: per configuration the interleaved medians of resprop's routes
    (default: compiled kernels, depth collapsed where the norms allow; the compiled layers; the NumPy kernels) and
    of neural-tangents, speed-ups, peak memory, deviation from neural-tangents and the distance to the elementwise
    limit; then the tanh matched-accuracy runs, the distance to the fastmath=True route and the issue-25 targets."""
    head = ("| config | inputs | resprop f64 | compiled layers | NumPy kernels | NT f32 | NT f64 | NT f32 / resprop "
            "| NT f64 / resprop | peak MiB resprop / output / NT f32 | max dev. off-diag. | (diag.) |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for key, cfg in rec["results"].items():
        act, P, L = key.split("_")[:3]
        for mode, o in cfg["modes"].items():
            f64 = o.get("nt_f64")
            dev = (f64 or o["nt_f32"])["deviation"]
            n32 = len(o["nt_f32"]["times_s"])
            rows.append("| " + " | ".join([
                f"{act} P={P[1:]} L={L[1:]} {mode.upper()}", cfg.get("inputs", "equal norms") + (
                    f" (re-measured {cfg['measured_at']}, resprop {cfg.get('resprop_commit', '?')})"
                    if "measured_at" in cfg and cfg.get("resprop_commit") else ""),
                _s(o["resprop"]["median_s"]),
                _s(o["layered"]["median_s"]) if "layered" in o else "–",
                _s(o["numpy"]["median_s"]) if "numpy" in o else "–",
                _s(o["nt_f32"]["median_s"]) + ("" if n32 >= 5 else f" ({n32} call{'s' if n32 > 1 else ''})"),
                (_s(f64["median_s"]) + ("" if len(f64["times_s"]) >= 5 else f" ({len(f64['times_s'])} call)"))
                if f64 else "not run",
                f"{o['ratio_nt_f32_over_resprop']:.1f}×", f"{o['ratio_nt_f64_over_resprop']:.1f}×" if f64 else "–",
                f"{o['resprop']['peak_MiB']:.0f} / {o['resprop'].get('output_MiB', float('nan')):.0f} / "
                f"{o['nt_f32']['peak_MiB']:.0f}",
                f"{max(d['offdiag'] for d in dev.values()):.1e}", f"{max(d['diag'] for d in dev.values()):.1e}"])
                + " |")
    m = rec["tanh_matched_accuracy"]
    acc = "; ".join(f"deg {deg}: {_s(r['nt_f64_s'])} ({r['ratio_nt_over_resprop']:.0f}× resprop), max dev. "
                    f"{max(r['max_dev_offdiag'], r['max_dev_diag']):.1e}" for deg, r in m["degrees"].items())
    fastest = "; ".join(f"{name}: {r['compiled_ns_per_element_layer']:.2f} vs {r['fastmath_ns_per_element_layer']:.2f}"
                        f" ns per element-layer ({r['compiled_over_fastmath']:.2f}×)"
                        for name, r in (rec.get("fastest_route") or {}).items())
    targets = "; ".join(f"{k}: {t['measured']:.3g} ({t['goal']}: {'met' if t['met'] else 'NOT met'})"
                        for k, t in rec.get("targets", {}).items())
    paired = rec.get("gelu_over_erf")
    if paired:
        when = rec.get("gelu_over_erf_measured_at", rec.get("timestamp", ""))
        targets = (f"GELU / erf time measured in pairs ({when}; erf and GELU back to back in each of "
                   f"{len(next(iter(paired.values()))['ratios'])} rounds, the median of the rounds' ratios): "
                   + "; ".join(f"{k}: {r['ratio_median']:.3f}" for k, r in paired.items()) + ". " + targets)
    return "\n".join([_provenance(rec, machine), "", head, *rows, "",
                      f"tanh at matched accuracy (NT `ElementwiseNumerical` float64, P = {m['P']}, L = {m['depth']}, "
                      f"NNGP; resprop {_s(m['resprop_median_s'])}): {acc}.", "",
                      f"The compiled kernels against the same source compiled with `fastmath=True` (every fast-math "
                      f"flag; one thread, a 64 × 1000 strip through 200 layers): {fastest or 'not run'}.", "",
                      f"Targets (issue 25): {targets or 'not evaluated (--quick)'}."])


RENDERERS = {"peers_nt": peers_nt_table, "kernel_engine": kernel_engine_table, "peers_torch": peers_torch_table}


def update_markdown(report: dict, path: Path = BENCHMARKS_MD) -> list[str]:
    """Replace each marked region of ``path`` whose benchmark is in ``report`` (a run_all.py record); returns
    the names updated.  A benchmark that was skipped (no peers venv) leaves its region as it was."""
    text = path.read_text()
    done = []
    for name, render in RENDERERS.items():
        rec = report["benchmarks"].get(name)
        if rec is None or "skipped" in rec:
            continue
        rec = {"timestamp": report.get("timestamp", ""), **rec}
        pattern = re.compile(rf"(<!-- generated: {name} -->\n)(?:.*?\n)?(<!-- end generated: {name} -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{path}: no '<!-- generated: {name} -->' ... '<!-- end generated: {name} -->' region")
        table = render(rec, rec.get("machine") or report["machine"])  # a script re-run alone keeps its own
        text = pattern.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text)
        done.append(name)
    path.write_text(text)
    return done


if __name__ == "__main__":
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results" / "latest.json"
    print("updated", update_markdown(json.loads(src.read_text())) or "nothing", "in", BENCHMARKS_MD)
